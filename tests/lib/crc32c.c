// SPDX-License-Identifier: GPL-2.0
/* crc32c.c - CRC-32C, bitwise-reflected polynomial 0x82f63b78. */
#include "crc32c.h"

uint32_t lab_crc32c(const void *p, size_t len)
{
	static uint32_t table[256];
	const unsigned char *b = p;
	uint32_t crc = ~0u;
	size_t i;

	if (!table[1]) {
		for (i = 0; i < 256; i++) {
			uint32_t c = (uint32_t)i;
			int k;

			for (k = 0; k < 8; k++)
				c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
			table[i] = c;
		}
	}
	for (i = 0; i < len; i++)
		crc = table[(crc ^ b[i]) & 0xff] ^ (crc >> 8);
	return ~crc;
}
