/* core/units.h - sizes for people: "1.50 KiB", "12.0 MiB". */
#ifndef TG_CORE_UNITS_H
#define TG_CORE_UNITS_H

#include <stddef.h>

/* Writes into buf and returns it. */
char *tg_bytes_str(double bytes, char *buf, size_t cap);

#endif
