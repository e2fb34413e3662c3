/* What built this library, for provenance.json (netkv/results/provenance.py):
 * the build type and compiler come from CMake (hostapps/CMakeLists.txt). */
#include "netkv/build_info.h"

#ifndef NK_BUILD_TYPE
#define NK_BUILD_TYPE "unknown"
#endif
#ifndef NK_COMPILER
#define NK_COMPILER "unknown"
#endif
#ifdef NETKV_DEBUG
#define NK_SANITIZE "1"
#else
#define NK_SANITIZE "0"
#endif

const char *nk_build_info(void)
{
	return "type=" NK_BUILD_TYPE ";compiler=" NK_COMPILER ";sanitize=" NK_SANITIZE;
}
