/* Empty: CUPTI's callback header includes CUDA's builtin_types.h for
 * types the tracer does not use. */
