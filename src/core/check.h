/* core/check.h - aborts for states the code cannot be in (internal).
 *
 * A status (core/error.h) is for what input or the system can cause; these
 * are for what only a bug can: a switch reaching a value it has no case for,
 * a kernel called with shapes its caller already refused. Falling through
 * to some last case would compute a wrong number silently; aborting names the
 * place and the value.
 *
 * TG_UNREACHABLE(what, value) always aborts, in every build: every switch
 * over an op, a mode or a kind ends in it instead of a `default:` that is
 * quietly one of the cases. TG_ASSERT(cond) checks in debug and sanitizer
 * builds (and in any build compiled with -DTILEGRAPH_ASSERT) and compiles to
 * nothing in Release, so kernels can assert their shapes and strides in
 * their loops' set-up without costing the Release build anything.
 */
#ifndef TG_CORE_CHECK_H
#define TG_CORE_CHECK_H

/* Print "FILE:LINE: unreachable: WHAT VALUE (NAME)" (NAME left out when
 * NULL) to stderr and abort(). */
_Noreturn void tg_unreachable_fail(const char *file, int line, const char *what, long long value,
                                   const char *name);
/* Print "FILE:LINE: assertion failed: EXPR" to stderr and abort(). */
_Noreturn void tg_assert_fail(const char *file, int line, const char *expr);

#define TG_UNREACHABLE(what, value)                                                                \
    tg_unreachable_fail(__FILE__, __LINE__, (what), (long long)(value), (const char *)0)

#if !defined(NDEBUG) || defined(TILEGRAPH_ASSERT)
#define TG_ASSERT_ON 1
#define TG_ASSERT(cond) ((cond) ? (void)0 : tg_assert_fail(__FILE__, __LINE__, #cond))
#else
#define TG_ASSERT_ON 0
/* not evaluated, but still compiled: an assertion cannot rot in Release */
#define TG_ASSERT(cond) ((void)sizeof(!(cond)))
#endif

#endif
