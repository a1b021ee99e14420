# Included by the top-level CMakeLists.txt when ULTICODE_FUZZ is ON, before
# any target exists: instruments every library of the tree for libFuzzer
# (coverage) with AddressSanitizer and UndefinedBehaviorSanitizer, and makes
# any UB abort. Executables link the sanitizer runtimes; the fuzz targets add
# -fsanitize=fuzzer (libFuzzer's main) in fuzz/CMakeLists.txt.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "ULTICODE_FUZZ needs clang (configure with CXX=clang++-14), not ${CMAKE_CXX_COMPILER_ID}")
endif()
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
  -fno-omit-frame-pointer -g -O1)
add_link_options(-fsanitize=address,undefined)
