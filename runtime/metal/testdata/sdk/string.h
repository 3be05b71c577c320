// Minimal stand-in for the C library header, for TestDarwinBridgeTypeChecks.
#pragma once
#include <stddef.h>
char *strdup(const char *);
size_t strlen(const char *);
void *memcpy(void *, const void *, size_t);
