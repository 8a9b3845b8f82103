/* tilegraph/export.h - TG_API, the mark of a public symbol.
 *
 * The library is compiled with -fvisibility=hidden, so libtilegraph.so
 * exports exactly the functions and variables whose declaration in
 * include/tilegraph/ carries TG_API, and none of its internal tg_ helpers.
 * scripts/api_annotate.py adds the mark and, with --check (a test in the
 * suite), refuses a public declaration without it.
 */
#ifndef TILEGRAPH_EXPORT_H
#define TILEGRAPH_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define TG_API __attribute__((visibility("default")))
#else
#define TG_API
#endif

#endif
