# ulticode_embed_migrations(<target> <namespace> <dir> <header>)
# Compiles every <dir>/NNNN_*.sql into <target> as a ulticode::migrations::Migration
# list returned by <namespace>::Migrations(), declared in the generated
# <header> (included as "<header>", e.g. "admin/migrations.h"), so binaries
# carry their schema and need no files at run time (handy in containers).
function(ulticode_embed_migrations target ns dir header)
  file(GLOB sql_files CONFIGURE_DEPENDS ${dir}/*.sql)
  list(SORT sql_files)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${target}_migrations.cc)
  set(include_dir ${CMAKE_CURRENT_BINARY_DIR}/${target}_include)
  set(out_h ${include_dir}/${header})
  string(REPLACE ";" "|" files_arg "${sql_files}")
  add_custom_command(
    OUTPUT ${out} ${out_h}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DOUT_H=${out_h} -DHEADER=${header} -DNS=${ns} "-DFILES=${files_arg}"
            -P ${PROJECT_SOURCE_DIR}/cmake/EmbedMigrations.cmake
    DEPENDS ${sql_files} ${PROJECT_SOURCE_DIR}/cmake/EmbedMigrations.cmake
    COMMENT "embedding migrations for ${target}"
    VERBATIM)
  add_library(${target} ${out} ${out_h})
  target_include_directories(${target} PUBLIC ${include_dir})
  target_link_libraries(${target} PUBLIC ulticode_migrations)
endfunction()
