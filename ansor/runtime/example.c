/* example.c: run an exported network from C, no Python. Fills every float32 input with a fixed
 * pattern, runs, prints the top-5 indices of the first output.
 * Build and run in the export directory:
 *   cc example.c -I. ./net.so -Wl,-rpath,'$ORIGIN' -o example && ./example net.weights */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ansor_net.h"

int main(int argc, char** argv) {
  void* ctx = ansor_create(argc > 1 ? argv[1] : "net.weights", 0);
  if (!ctx) { fprintf(stderr, "%s\n", ansor_last_error()); return 1; }
  int ni = ansor_num_inputs(), no = ansor_num_outputs();
  void** in = calloc(ni, sizeof(void*));
  void** out = calloc(no, sizeof(void*));
  for (int i = 0; i < ni; i++) {
    if (strcmp(ansor_input_dtype(i), "float32") != 0) {
      fprintf(stderr, "input %s is %s: this example fills float32 inputs only\n", ansor_input_name(i), ansor_input_dtype(i));
      return 1;
    }
    int64_t n = ansor_input_nbytes(i) / 4;
    float* x = malloc(n * 4 + 1);
    for (int64_t j = 0; j < n; j++) x[j] = (float)(j % 17 - 8) / 8.0f;  /* the fixed pattern */
    in[i] = x;
  }
  for (int i = 0; i < no; i++) out[i] = malloc(ansor_output_nbytes(i) + 1);
  if (ansor_run(ctx, (const void* const*)in, out) != 0) { fprintf(stderr, "%s\n", ansor_last_error()); return 1; }
  if (no > 0 && strcmp(ansor_output_dtype(0), "float32") == 0) {
    const float* y = out[0];
    int64_t n = ansor_output_nbytes(0) / 4, top[5];
    printf("top-5 of %s:", ansor_output_name(0));
    for (int k = 0; k < 5 && k < n; k++) {  /* the k-th largest; ties: the lowest index */
      top[k] = -1;
      for (int64_t j = 0; j < n; j++) {
        int taken = 0;
        for (int t = 0; t < k; t++) taken |= top[t] == j;
        if (!taken && (top[k] < 0 || y[j] > y[top[k]])) top[k] = j;
      }
      printf(" %lld", (long long)top[k]);
    }
    printf("\n");
  }
  for (int i = 0; i < ni; i++) free(in[i]);
  for (int i = 0; i < no; i++) free(out[i]);
  free(in); free(out);
  ansor_destroy(ctx);
  return 0;
}
