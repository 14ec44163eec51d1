/* SPDX-License-Identifier: GPL-2.0 */
/*
 * fscrypt_ref.h - an independent userspace model of fscrypt v2 encryption,
 * built on OpenSSL's libcrypto (link with -lcrypto), used to check what the
 * kernel wrote to disk.
 *
 * What it models (v2 policy, no DIRECT_KEY / IV_INO_LBLK_* flags), as the
 * kernel does it in fs/crypto/{hkdf,keysetup,crypto,fname}.c:
 *
 *  - HKDF-SHA512 from the master key, salt empty, info =
 *    "fscrypt\0" || context byte || context-specific info;
 *  - key identifier: context 1, info empty, 16 bytes;
 *  - per-file key: context 2, info = the file's 16-byte nonce, as many
 *    bytes as the mode takes (64 for AES-256-XTS, 32 for AES-256-CTS);
 *  - per-extent key (fs/crypto/extent.c, files a filesystem encrypts per
 *    extent): context 9, info = the 16-byte key nonce of the extent's
 *    context (version 2: the nonce of the key group the extent was written
 *    in, shared by the group's extents; version 1: the extent's own), 64
 *    bytes for AES-256-XTS;
 *  - contents: AES-256-XTS per data unit (the filesystem block).  Per-file
 *    keys: IV = le64(block number in the file) followed by zeros.
 *    Per-extent keys: IV = le64(data unit in the extent, counted from the
 *    start of the extent as it was first written) || le64(the extent's
 *    number in its key group; 0 for a version 1 context);
 *  - names: AES-256-CBC with ciphertext stealing (CS3: the last two blocks
 *    are swapped, as the kernel's cts(cbc(aes)) does), IV 0, the name
 *    zero-padded to max(len, 16) rounded up to the policy's padding, capped
 *    at NAME_MAX.
 *
 * Functions return 0 on success, -1 on a libcrypto error (printed).
 */
#ifndef FSCRYPT_REF_H
#define FSCRYPT_REF_H

#include <stddef.h>
#include <stdint.h>

#define FREF_NONCE_SIZE 16
#define FREF_ID_SIZE 16
#define FREF_XTS_KEY_SIZE 64
#define FREF_CTS_KEY_SIZE 32
#define FREF_NAME_MAX 255

/* The HKDF context bytes of fs/crypto/fscrypt_private.h that we use. */
#define FREF_CTX_KEY_IDENTIFIER 1
#define FREF_CTX_PER_FILE_ENC_KEY 2
#define FREF_CTX_PER_EXTENT_KEY 9

/* HKDF-SHA512(@mk) expanded with "fscrypt\0" || @ctx || @info to @out. */
int fref_hkdf(const uint8_t *mk, size_t mklen, uint8_t ctx,
	      const uint8_t *info, size_t infolen, uint8_t *out, size_t outlen);

/* The master key identifier the kernel reports for @mk. */
int fref_key_identifier(const uint8_t *mk, size_t mklen,
			uint8_t id[FREF_ID_SIZE]);

/* The per-file key (context 2) of a file with @nonce, @keylen bytes. */
int fref_per_file_key(const uint8_t *mk, size_t mklen,
		      const uint8_t nonce[FREF_NONCE_SIZE], uint8_t *key,
		      size_t keylen);

/* The per-extent key (context 9) of an extent with @nonce, @keylen bytes. */
int fref_per_extent_key(const uint8_t *mk, size_t mklen,
			const uint8_t nonce[FREF_NONCE_SIZE], uint8_t *key,
			size_t keylen);

/*
 * AES-256-XTS of one data unit @in (@len bytes) whose IV is block number
 * @lblk, high 64 bits of the tweak zero (per-file keys: the logical block in
 * the file; per-extent keys in a version 1 context: the block in the
 * extent).  Same as fref_encrypt_block_tweak(key, lblk, 0, ...).
 */
int fref_encrypt_block(const uint8_t key[FREF_XTS_KEY_SIZE], uint64_t lblk,
		       const uint8_t *in, uint8_t *out, size_t len);

/*
 * AES-256-XTS of one data unit with the 16-byte tweak le64(@lo) ||
 * le64(@hi).  fscrypt's IVs all have @hi = 0; a nonzero @hi is the layout
 * of the 6.1 series' key groups (the extent number in tweak bytes 8-15),
 * which the tests keep as a negative control.
 */
int fref_encrypt_block_tweak(const uint8_t key[FREF_XTS_KEY_SIZE], uint64_t lo,
			     uint64_t hi, const uint8_t *in, uint8_t *out,
			     size_t len);

/*
 * The inverse of fref_encrypt_block_tweak(): AES-256-XTS decryption of one
 * data unit @in (@len bytes) with the tweak le64(@lo) || le64(@hi), for
 * data whose plaintext the model cannot know beforehand (e.g. what a
 * filesystem compressed before it encrypted).
 */
int fref_decrypt_block_tweak(const uint8_t key[FREF_XTS_KEY_SIZE], uint64_t lo,
			     uint64_t hi, const uint8_t *in, uint8_t *out,
			     size_t len);

/*
 * The 64-bit DUN of data unit @unit of extent @nr in its key group
 * (fscrypt_extent_dun()): @nr in the high 32 bits, @unit in the low 32.
 * Both must be below 2^32; the kernel refuses extents that would not fit.
 */
uint64_t fref_extent_dun(uint64_t nr, uint64_t unit);

/*
 * AES-256-XTS of data unit @unit of the extent numbered @nr in its key group
 * (0 for a version 1 context): the tweak is le64(fref_extent_dun()) and
 * zeroes.  Fails (-1, printed) if @nr or @unit is 2^32 or more.
 */
int fref_encrypt_extent_unit(const uint8_t key[FREF_XTS_KEY_SIZE], uint64_t nr,
			     uint64_t unit, const uint8_t *in, uint8_t *out,
			     size_t len);

/*
 * Length of the encrypted form of a @namelen-byte name under a policy whose
 * flags are @policy_flags (FSCRYPT_POLICY_FLAGS_PAD_*), or 0 if too long.
 */
size_t fref_fname_len(size_t namelen, uint8_t policy_flags);

/*
 * Encrypt the name @name (@namelen bytes) with the directory key @key; the
 * ciphertext (fref_fname_len() bytes, at most FREF_NAME_MAX) goes to @out
 * and its length to *@outlen.
 */
int fref_encrypt_name(const uint8_t key[FREF_CTS_KEY_SIZE], const char *name,
		      size_t namelen, uint8_t policy_flags, uint8_t *out,
		      size_t *outlen);

/*
 * Self-check of the model that needs no kernel: the CS3 names from
 * OpenSSL's AES-256-CBC-CTS equal a CBC-then-swap construction built by
 * hand, for lengths 16 (one block: no swap), 32 (full blocks: swap), 40 and
 * 255 (stolen bytes); and the first AES blocks of a data unit under
 * fref_encrypt_block_tweak() equal XTS built by hand from AES-256-ECB
 * (T = E_K2(le64(lo) || le64(hi)), C_j = E_K1(P_j ^ T_j) ^ T_j,
 * T_j+1 = T_j * x in GF(2^128)), so the extent number really is the
 * tweak's high half, little endian; and fref_encrypt_extent_unit() puts
 * the extent number in DUN bits 32-63 and refuses what does not fit.
 * Returns 0 if all agree, -1 (printed)
 * otherwise.
 */
int fref_selftest(void);

#endif /* FSCRYPT_REF_H */
