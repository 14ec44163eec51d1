/* SPDX-License-Identifier: GPL-2.0 */
/*
 * crc32c.h - CRC-32C (Castagnoli), as btrfs checksums its superblock and
 * tree blocks (the default csum type), for tests that damage metadata on
 * purpose and must keep its checksum valid.
 */
#ifndef LAB_CRC32C_H
#define LAB_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* crc32c of @len bytes at @p, as btrfs stores it (little-endian u32). */
uint32_t lab_crc32c(const void *p, size_t len);

#endif /* LAB_CRC32C_H */
