// Minimal stand-in for the C library header, for TestDarwinBridgeTypeChecks.
#pragma once
#include <stddef.h>
void *malloc(size_t);
void *calloc(size_t, size_t);
void free(void *);
