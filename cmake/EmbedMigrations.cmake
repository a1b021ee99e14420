# Script mode: writes OUT, a .cc defining NS::Migrations() from FILES.
string(REPLACE "|" ";" FILES "${FILES}")
set(body "")
foreach(f ${FILES})
  get_filename_component(name ${f} NAME_WE)
  string(REGEX MATCH "^[0-9]+" version ${name})
  if(NOT version)
    message(FATAL_ERROR "migration ${f} is not named NNNN_what.sql")
  endif()
  math(EXPR version "${version}")
  file(READ ${f} sql)
  file(SHA256 ${f} sum)
  string(APPEND body "      {${version}, \"${name}\", \"${sum}\", R\"ulti_sql(${sql})ulti_sql\"},\n")
endforeach()
file(WRITE ${OUT}.tmp "// Generated from SQL files; do not edit.
#include \"common/migrations/migrations.h\"
namespace ${NS} {
const std::vector<ulticode::migrations::Migration>& Migrations() {
  static const auto* kMigrations = new std::vector<ulticode::migrations::Migration>{
${body}  };
  return *kMigrations;
}
}  // namespace ${NS}
")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
