# Helpers shared by every component's CMakeLists.txt.
include(GoogleTest)

# ek_library(NAME SOURCES... DEPS ...) -> static library ek_NAME with src/ on its include path.
function(ek_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(ek_${name} STATIC ${ARG_SOURCES})
  target_include_directories(ek_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(ek_${name} PUBLIC ${ARG_DEPS})
endfunction()

# ek_test(NAME SOURCES... DEPS ... LABELS ...) -> one gtest binary per component, labelled.
function(ek_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    EK_SOURCE_DIR="${PROJECT_SOURCE_DIR}" EK_BINARY_DIR="${PROJECT_BINARY_DIR}")
  # The test code itself at -O1 (the code under test is the libraries, built at the build
  # type's level): gtest's macros at -O3 cost a third more compile time for nothing a test
  # measures. After the build type's flags on the command line, so it wins.
  # Under clang's sanitizers (build-san, which CI builds cold on every run) the test code
  # at -O0: half of that build, and about half the CPU of -O1 under ASan + UBSan + coverage
  # (core_test's unity batch: 21.6 s against 40.7 s); the libraries stay at -O1. All of
  # build-san at -O0 made its unit tests 4x slower, and a template fuzz regression (a 1 MiB
  # string repeated 1 Mi times, cut at the output bound) outran libFuzzer's timeout.
  if(NOT EK_SANITIZE)
    target_compile_options(${name} PRIVATE -O1)
  elseif(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    target_compile_options(${name} PRIVATE -O0)
  endif()
  gtest_discover_tests(${name} PROPERTIES LABELS "${ARG_LABELS}" DISCOVERY_TIMEOUT 60)
  set_property(GLOBAL APPEND PROPERTY EK_TEST_TARGETS ${name})
endfunction()
