/* ansor_net.h: the C interface of a network library exported by ansor-py
 * (`ansor network export MODEL --log LOG -o DIR/net.so`, or NetworkModule.export_library).
 *
 * A context owns its buffers and its thread count: create one per thread that runs the network
 * (contexts are independent; one context must not run in two threads at once). Inputs and
 * outputs are C-contiguous arrays in the order, shapes and dtypes of the query functions (the
 * `dtype` is what the library reads and writes: a float16/bfloat16 boundary of the model is
 * float32 here; net.json's `boundary_dtype` is the Python loader's conversion).
 * The library is code: load only libraries you trust. */
#ifndef ANSOR_NET_H
#define ANSOR_NET_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

/* Maps the weights file (net.weights) and allocates the buffers; num_threads: the threads a
 * parallel kernel runs on (the library's own pool), <= 0: the CPUs this process may run on
 * (sched_getaffinity). NULL on failure: see ansor_last_error(). */
void* ansor_create(const char* weights_path, int num_threads);
/* Runs the network: inputs[i] is read, outputs[i] written (ansor_*_nbytes(i) bytes each).
 * 0 on success, -1 on a NULL argument (see ansor_last_error()). */
int ansor_run(void* ctx, const void* const* inputs, void* const* outputs);
void ansor_destroy(void* ctx);
/* The last error of this thread, one line. */
const char* ansor_last_error(void);
int ansor_get_num_threads(const void* ctx);

int ansor_num_inputs(void);
int ansor_num_outputs(void);
/* i out of range: NULL, -1. */
const char* ansor_input_name(int i);
const char* ansor_input_dtype(int i);
int ansor_input_ndim(int i);
const int64_t* ansor_input_shape(int i);
int64_t ansor_input_nbytes(int i);
const char* ansor_output_name(int i);
const char* ansor_output_dtype(int i);
int ansor_output_ndim(int i);
const int64_t* ansor_output_shape(int i);
int64_t ansor_output_nbytes(int i);

/* {"format", "version", "inputs", "outputs", "required_features"} as JSON. */
const char* ansor_metadata_json(void);
/* The CPU features the code needs (LLVM names, comma-separated), e.g. "avx,avx2,fma". */
const char* ansor_required_features(void);

#ifdef __cplusplus
}
#endif
#endif
