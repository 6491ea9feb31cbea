/* runner.h - the buffers of one call through a gradc object's C ABI, for the
 * main that bench/zoo/object_run.py generates from a model's manifest.
 * Inputs are read from raw files (IN/FIELD.bin, exactly as many bytes as the
 * header says), outputs and the workspace start as garbage (0xAB bytes, so
 * that an output left unwritten cannot pass as zeros), and each output is
 * written back raw to OUT/FIELD.bin. Any failure ends the process with a
 * message and exit status 1. */
#ifndef ZOO_RUNNER_H
#define ZOO_RUNNER_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *runner_in_dir, *runner_out_dir;

static void runner_fail(const char *what, const char *name) {
  fprintf(stderr, "runner: %s %s\n", what, name);
  exit(1);
}

/* A 64-byte aligned buffer of BYTES bytes (at least 64) holding 0xAB bytes. */
static void *runner_garbage(size_t bytes) {
  size_t size = bytes ? (bytes + 63) / 64 * 64 : 64;
  void *p = aligned_alloc(64, size);
  if (!p)
    runner_fail("out of memory for", "a buffer");
  memset(p, 0xAB, size);
  return p;
}

static void runner_path(char *path, size_t size, const char *dir, const char *name) {
  if ((size_t)snprintf(path, size, "%s/%s.bin", dir, name) >= size)
    runner_fail("path too long:", name);
}

/* The input NAME: IN/NAME.bin, which must hold exactly BYTES bytes. */
static void *runner_input(const char *name, size_t bytes) {
  char path[4096];
  runner_path(path, sizeof path, runner_in_dir, name);
  FILE *f = fopen(path, "rb");
  if (!f)
    runner_fail("cannot open", path);
  void *p = runner_garbage(bytes);
  if (fread(p, 1, bytes, f) != bytes || fgetc(f) != EOF)
    runner_fail("wrong size (not the header's _BYTES):", path);
  fclose(f);
  return p;
}

static void runner_output(const char *name, const void *p, size_t bytes) {
  char path[4096];
  runner_path(path, sizeof path, runner_out_dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, bytes, f) != bytes || fclose(f) != 0)
    runner_fail("cannot write", path);
}

#endif
