# ulticode_embed_migrations(<target> <namespace> <dir>)
# Compiles every <dir>/NNNN_*.sql into <target> as a ulticode::migrations::Migration
# list returned by <namespace>::Migrations(), so binaries carry their schema
# and need no files at run time (handy in containers).
function(ulticode_embed_migrations target ns dir)
  file(GLOB sql_files CONFIGURE_DEPENDS ${dir}/*.sql)
  list(SORT sql_files)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${target}_migrations.cc)
  string(REPLACE ";" "|" files_arg "${sql_files}")
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DNS=${ns} "-DFILES=${files_arg}"
            -P ${PROJECT_SOURCE_DIR}/cmake/EmbedMigrations.cmake
    DEPENDS ${sql_files} ${PROJECT_SOURCE_DIR}/cmake/EmbedMigrations.cmake
    COMMENT "embedding migrations for ${target}"
    VERBATIM)
  add_library(${target} ${out})
  target_link_libraries(${target} PUBLIC ulticode_migrations)
endfunction()
