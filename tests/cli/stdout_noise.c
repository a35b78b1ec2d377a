/* A library that prints on stdout when it is loaded and when the process exits, as a monitoring
 * agent's preload or CUBLASLT_LOG_LEVEL does: preloaded into sdcprobe, it must change no verdict. */
#include <stdio.h>

__attribute__((constructor)) static void noise_at_load(void) {
  printf("[noise] preloaded library loaded\n");
  fflush(stdout);
}

__attribute__((destructor)) static void noise_at_exit(void) {
  printf("[noise] preloaded library unloading {\"not\": \"json\"}\n");
  fflush(stdout);
}
