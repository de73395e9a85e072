/* skim: the floor of reading a pickle — a walk of its opcodes from the
 * start to STOP that skips every argument and builds nothing (no stack, no
 * memo, no objects). What any reader of the file must at least do; snapdiff's
 * read is measured against it (bench/bench_floor.sh, docs/performance.md).
 *
 *   skim FILE.pickle     prints "OPCODES BYTES" (exit 0), or one line on
 *                        stderr and exit 3 for a file that is not a pickle
 *                        it can walk (an unknown opcode, a cut argument).
 *
 * The file is mapped (read from the page cache like any reader); gzip inputs
 * are not walked (decompress them first: the floor of gzip is zcat's).
 * Opcodes per pickletools (protocols 0-5). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t le(const unsigned char* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: skim FILE.pickle\n");
    return 2;
  }
  int fd = open(argv[1], O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    perror(argv[1]);
    return 3;
  }
  const size_t n = (size_t)st.st_size;
  if (n == 0) {
    fprintf(stderr, "skim: %s: empty\n", argv[1]);
    return 3;
  }
  const unsigned char* b = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
  if (b == MAP_FAILED) {
    perror("mmap");
    return 3;
  }
  madvise((void*)b, n, MADV_SEQUENTIAL);
  size_t i = 0;
  uint64_t ops = 0;
  for (;;) {
    if (i >= n) {
      fprintf(stderr, "skim: %s: offset %zu: the file ends before STOP\n", argv[1], i);
      return 3;
    }
    const unsigned char op = b[i++];
    ++ops;
    uint64_t skip = 0;
    int len_bytes = 0;
    switch (op) {
      case '.':  // STOP
        printf("%llu %zu\n", (unsigned long long)ops, i);
        return 0;
      // no argument
      case '(': case '0': case '1': case '2': case 'N': case ')': case ']': case '}': case 'a': case 'e':
      case 's': case 'u': case 't': case 'l': case 'd': case 'R': case 'b': case 'o': case 'Q':
      case 0x81: case 0x85: case 0x86: case 0x87: case 0x88: case 0x89: case 0x8f: case 0x90: case 0x91: case 0x92:
      case 0x93: case 0x94: case 0x97: case 0x98:
        continue;
      // fixed-size arguments
      case 'K': case 'q': case 'h': case 0x80: case 0x82: skip = 1; break;
      case 'M': case 0x83: skip = 2; break;
      case 'J': case 'r': case 'j': case 0x84: skip = 4; break;
      case 'G': case 0x95: skip = 8; break;
      // a length, then that many bytes
      case 'U': case 0x8c: case 'C': case 0x8a: len_bytes = 1; break;
      case 'T': case 'X': case 'B': case 0x8b: len_bytes = 4; break;
      case 0x8d: case 0x8e: case 0x96: len_bytes = 8; break;
      // protocol 0: one line (GLOBAL and INST: two)
      case 'I': case 'L': case 'F': case 'S': case 'V': case 'p': case 'g': case 'P': case 'c': case 'i': {
        int lines = (op == 'c' || op == 'i') ? 2 : 1;
        while (lines-- > 0) {
          const unsigned char* nl = memchr(b + i, '\n', n - i);
          if (!nl) {
            fprintf(stderr, "skim: %s: offset %zu: a line without its end\n", argv[1], i);
            return 3;
          }
          i = (size_t)(nl - b) + 1;
        }
        continue;
      }
      default:
        fprintf(stderr, "skim: %s: offset %zu: unknown opcode 0x%02x\n", argv[1], i - 1, op);
        return 3;
    }
    if (len_bytes) {
      if (n - i < (size_t)len_bytes) break;
      skip = le(b + i, len_bytes);
      i += (size_t)len_bytes;
    }
    if (skip > n - i) break;
    i += skip;
  }
  fprintf(stderr, "skim: %s: offset %zu: an argument runs past the end\n", argv[1], i);
  return 3;
}
