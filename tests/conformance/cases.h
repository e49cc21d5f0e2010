/*
 * cases.h: what the programs walking ONNX backend test cases share
 * (conformance.c, roundtrip.c): listing case folders, reading a data set's
 * tensors, and running one case in a child process with a time limit.
 */
#ifndef KILN_TESTS_CASES_H
#define KILN_TESTS_CASES_H

#include "ir/ir.h"

/* Sorted names of dir's subfolders starting with prefix (NULL: all).
 * OUT: *out (malloc'd array of malloc'd names). -1 when dir cannot be read. */
int cases_list_dirs(const char *dir, const char *prefix, char ***out);
void cases_free_names(char **names, int n);

/* Reads dir/KIND_0.pb, KIND_1.pb, ... (KIND "input" or "output") into ts;
 * returns how many, or -1 on a read error (in d). */
int cases_read_set(const char *dir, const char *kind, ir_tensor *ts, int max, base_diag *d);

/* Runs run(case_dir, why, n) in a child with a time limit of timeout_s; a
 * crash or a time-out is a failure with a reason in why. Returns run's
 * exit value, or fail_code when the child died. */
int cases_run_isolated(int (*run)(const char *case_dir, char *why, size_t n), const char *case_dir, int timeout_s,
                       int fail_code, char *why, size_t n);

/* A child process that runs cases one after another, so that what a process
 * sets up once (a CUDA context) is paid once and not per case. Each case has
 * its own time limit; a case that crashes or times out ends the child (the
 * case fails with the reason in why), and the next case starts a fresh one.
 * Cases share the child's memory, so a case that corrupts it can spoil the
 * ones after it: use cases_run_isolated where that matters more than time. */
typedef struct cases_worker cases_worker;
cases_worker *cases_worker_new(int (*run)(const char *case_dir, char *why, size_t n), int timeout_s, int fail_code);
/* As cases_run_isolated, in w's child. */
int cases_worker_run(cases_worker *w, const char *case_dir, char *why, size_t n);
/* Ends the child and frees w (NULL: nothing). */
void cases_worker_free(cases_worker *w);

#endif
