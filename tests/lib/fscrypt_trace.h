/* SPDX-License-Identifier: GPL-2.0 */
/*
 * fscrypt_trace.h - counting the series' fscrypt tracepoints (tracefs,
 * /sys/kernel/tracing, which lab-init mounts) around a piece of work, to
 * show that the work reached the code it targets: e.g. that reading a
 * compressed encrypted file decrypted its extents (fscrypt_crypt_blocks),
 * or that a file holds extents of two keys (fscrypt_extent_lookup with two
 * key ids).  Not for concurrent use: tracing is global.
 *
 *   struct lab_trace_count c;
 *   if (lab_trace_start() == 0) {
 *           ... the work ...
 *           lab_trace_stop(&c);
 *   }
 *
 * Return convention as in lab.h: 0 on success, -1 with errno set.
 */
#ifndef FSCRYPT_TRACE_H
#define FSCRYPT_TRACE_H

#include <stddef.h>
#include <stdint.h>

#define LAB_TRACE_MAX_KEYS 64

struct lab_trace_count {
	unsigned long setup_info;	/* fscrypt_setup_info */
	unsigned long derive_key;	/* fscrypt_derive_key (HKDF-Expand) */
	unsigned long decrypt, encrypt;	/* fscrypt_crypt_blocks, by direction */
	unsigned long blocks_decrypted;	/* their nr_blocks, decrypt */
	unsigned long extent_lookup;	/* fscrypt_extent_lookup */
	unsigned long extent_key_setup;	/* fscrypt_extent_key_setup */
	unsigned long errors;		/* events with ret != 0 */
	unsigned long extent_keys;	/* distinct key_id of the lookups */
	unsigned long lost;		/* events the buffer lost (overrun) */
	uint64_t key_ids[LAB_TRACE_MAX_KEYS];
};

/*
 * Empty the trace buffer, enable the fscrypt events counted above and turn
 * tracing on.  Fails (ENOENT) on a kernel without them.
 */
int lab_trace_start(void);

/* Turn tracing off, disable the events, and count what the buffer holds. */
int lab_trace_stop(struct lab_trace_count *c);

/* "N decrypt events (B blocks), L extent lookups (K keys), D derivations, S setups" */
char *lab_trace_str(char *out, size_t size, const struct lab_trace_count *c);

#endif /* FSCRYPT_TRACE_H */
