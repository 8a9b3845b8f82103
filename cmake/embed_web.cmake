# cmake/embed_web.cmake - turns the HTML report page (web/report.html, .css,
# .js) into a C source holding each file as a byte array, so `tilegraph
# report` writes a self-contained page without reading files at run time.
# Run as: cmake -DWEB_DIR=... -DOUT=... -P embed_web.cmake
set(content "/* generated from web/ by cmake/embed_web.cmake; do not edit */\n#include <stddef.h>\n")
foreach(name report.html report.css report.js)
  file(READ ${WEB_DIR}/${name} hex HEX)
  string(LENGTH "${hex}" n)
  math(EXPR len "${n} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(MAKE_C_IDENTIFIER ${name} id)
  string(APPEND content "const unsigned char tg_web_${id}[] = {${bytes}0x00};\n"
                        "const size_t tg_web_${id}_len = ${len};\n")
endforeach()
file(WRITE ${OUT} "${content}")
