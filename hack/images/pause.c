/*
 * pause: the process that holds a pod sandbox's namespaces open.
 * It sleeps until SIGINT or SIGTERM (then exits 0) and, being PID 1 of the
 * pod's PID namespace when that is shared, reaps every child on SIGCHLD.
 * Built with `gcc -static` by hack/images.sh into registry.k8s.io/pause.
 */
#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_term(int sig) { (void)sig; _exit(0); }

static void on_child(int sig) {
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(void) {
	struct sigaction term = {.sa_handler = on_term};
	struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP | SA_RESTART};

	if (sigaction(SIGINT, &term, NULL) || sigaction(SIGTERM, &term, NULL) ||
	    sigaction(SIGCHLD, &child, NULL))
		return 1;
	for (;;)
		pause();
}
