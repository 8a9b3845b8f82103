# onnx.proto (from Debian's libonnx-dev) compiled by protoc-c at build time
# into an object library, tg_onnx_proto, linked into both libtilegraph.a
# and libtilegraph.so (hidden: it is not part of the API): the ONNX importer (src/onnx/)
# parses models with it instead of a hand-written protobuf reader. The
# generated header is reached as "onnx.pb-c.h" by the importer and its tests.
pkg_check_modules(PROTOBUF_C IMPORTED_TARGET libprotobuf-c)
find_program(TG_PROTOC_C protoc-c)
set(TG_ONNX_PROTO /usr/include/onnx/onnx.proto CACHE FILEPATH "onnx.proto to compile")
if(NOT PROTOBUF_C_FOUND OR NOT TG_PROTOC_C OR NOT EXISTS ${TG_ONNX_PROTO})
  message(FATAL_ERROR "the ONNX importer needs protobuf-c and onnx.proto: install the Debian "
                      "packages libprotobuf-c-dev, protobuf-c-compiler and libonnx-dev "
                      "(make deps does), or set TG_ONNX_PROTO to an onnx.proto")
endif()

set(TG_ONNX_GEN_DIR ${PROJECT_BINARY_DIR}/onnx_proto)
# protoc-c names its outputs after the proto's path relative to --proto_path
get_filename_component(TG_ONNX_PROTO_DIR ${TG_ONNX_PROTO} DIRECTORY)
add_custom_command(OUTPUT ${TG_ONNX_GEN_DIR}/onnx.pb-c.c ${TG_ONNX_GEN_DIR}/onnx.pb-c.h
                   COMMAND ${CMAKE_COMMAND} -E make_directory ${TG_ONNX_GEN_DIR}
                   COMMAND ${TG_PROTOC_C} --proto_path=${TG_ONNX_PROTO_DIR}
                           --c_out=${TG_ONNX_GEN_DIR} ${TG_ONNX_PROTO}
                   DEPENDS ${TG_ONNX_PROTO}
                   COMMENT "Compiling onnx.proto with protoc-c")
add_library(tg_onnx_proto OBJECT ${TG_ONNX_GEN_DIR}/onnx.pb-c.c)
set_target_properties(tg_onnx_proto PROPERTIES POSITION_INDEPENDENT_CODE ON
                      C_VISIBILITY_PRESET hidden)
# generated code: our warning flags are not its business
target_compile_options(tg_onnx_proto PRIVATE -w)
target_include_directories(tg_onnx_proto PUBLIC ${TG_ONNX_GEN_DIR})
target_link_libraries(tg_onnx_proto PUBLIC PkgConfig::PROTOBUF_C)
