/*
 * proc.c - process life cycle shared by the programs.
 */
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "netkv/io.h"

int nk_exit_with_parent(int sig)
{
	pid_t parent = getppid();
	if (prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) < 0)
		return -1;
	/* the parent may have died before prctl: we were then re-parented (to
	 * init or a subreaper) and no signal will come */
	return getppid() == parent && parent != 1 ? 0 : -1;
}
