# Every fuzz/fuzz_<name>.c built without libFuzzer (fuzz/replay_main.c gives
# it a main) against the normal library, and its seeds corpus/<name>/
# replayed as the CTest fuzz/<name>: a target that stops compiling or
# linking, or fails on its own seeds, fails the ordinary build and suite
# (`make fuzz` alone had rotted unnoticed). A few seconds in all.
file(GLOB TG_REPLAY_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/fuzz/fuzz_*.c)
foreach(src ${TG_REPLAY_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  string(REPLACE "fuzz_" "" short ${name})
  set(target replay_${name})
  add_executable(${target} ${src} ${PROJECT_SOURCE_DIR}/fuzz/replay_main.c)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests
                                               ${TG_ONNX_GEN_DIR})
  target_compile_definitions(${target} PRIVATE _POSIX_C_SOURCE=200809L)
  if(name STREQUAL "fuzz_random_graph")
    # the random graph generator of the test support (tests/CMakeLists.txt)
    target_link_libraries(${target} PRIVATE tg_test_support)
  endif()
  target_link_libraries(${target} PRIVATE tilegraph)
  add_test(NAME fuzz/${short} COMMAND ${target} ${PROJECT_SOURCE_DIR}/fuzz/corpus/${short})
  set_tests_properties(fuzz/${short} PROPERTIES TIMEOUT 300 LABELS quick)
endforeach()
