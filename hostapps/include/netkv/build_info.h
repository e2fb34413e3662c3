/*
 * build_info.h - what built libnetkv, so that a run's provenance names it.
 */
#ifndef NETKV_BUILD_INFO_H
#define NETKV_BUILD_INFO_H

/* "type=<CMAKE_BUILD_TYPE>;compiler=<id> <version>;sanitize=<0|1>" */
const char *nk_build_info(void);

#endif
