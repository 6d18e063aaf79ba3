/*
 * Asks libmemcached which server each key goes to, with
 * MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED (ketama continuum, MD5 keys), through
 * its own memcached_generate_hash. No server is contacted.
 *
 * stdin: a line with the server count N, N lines "HOST PORT WEIGHT" (a
 * HOST starting with '/' is a unix socket, PORT ignored), then one key per
 * line in hex. stdout: for each key, the index of its server.
 *
 * Built and run by regen.py: cc -O2 -o trace libmemcached_trace.c -lmemcached
 */
#include <libmemcached/memcached.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unhex(const char *s, unsigned char *out, size_t cap) {
  size_t n = strlen(s);
  if (n % 2 || n / 2 > cap) return -1;
  for (size_t i = 0; i < n / 2; i++) {
    unsigned int b;
    if (sscanf(s + 2 * i, "%2x", &b) != 1) return -1;
    out[i] = (unsigned char) b;
  }
  return (int) (n / 2);
}

int main(void) {
  memcached_st *memc = memcached_create(NULL);
  unsigned n;
  if (!memc || scanf("%u", &n) != 1) return 2;
  for (unsigned i = 0; i < n; i++) {
    char host[1100];
    unsigned port, weight;
    if (scanf("%1099s %u %u", host, &port, &weight) != 3) return 2;
    memcached_return_t rc = host[0] == '/'
        ? memcached_server_add_unix_socket_with_weight(memc, host, weight)
        : memcached_server_add_with_weight(memc, host, (in_port_t) port, weight);
    if (rc != MEMCACHED_SUCCESS) {
      fprintf(stderr, "adding %s:%u: %s\n", host, port, memcached_strerror(memc, rc));
      return 1;
    }
  }
  if (memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1) != MEMCACHED_SUCCESS) {
    fprintf(stderr, "cannot enable MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED\n");
    return 1;
  }
  char line[2048];
  unsigned char key[1024];
  while (scanf("%2047s", line) == 1) {
    int len = unhex(line, key, sizeof key);
    if (len < 0) return 2;
    printf("%u\n", memcached_generate_hash(memc, (const char *) key, (size_t) len));
  }
  memcached_free(memc);
  return 0;
}
