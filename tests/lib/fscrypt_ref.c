// SPDX-License-Identifier: GPL-2.0
/* Userspace model of fscrypt v2 encryption on libcrypto; see fscrypt_ref.h. */
#include "fscrypt_ref.h"

#include <stdio.h>
#include <string.h>
#include <linux/fscrypt.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>

#define FREF_AES_BLOCK 16
/* fs/crypto/fname.c: FSCRYPT_FNAME_MIN_MSG_LEN */
#define FREF_FNAME_MIN_LEN 16

static int fref_ossl_error(const char *what)
{
	unsigned long e = ERR_get_error();
	char buf[256] = "no libcrypto error queued";

	if (e)
		ERR_error_string_n(e, buf, sizeof(buf));
	printf("fscrypt_ref: %s failed: %s\n", what, buf);
	return -1;
}

int fref_hkdf(const uint8_t *mk, size_t mklen, uint8_t ctx,
	      const uint8_t *info, size_t infolen, uint8_t *out, size_t outlen)
{
	uint8_t full_info[9 + 64];
	OSSL_PARAM params[4];
	EVP_KDF_CTX *kctx;
	EVP_KDF *kdf;
	int ok;

	if (infolen > sizeof(full_info) - 9) {
		printf("fscrypt_ref: HKDF info of %zu bytes is too long\n", infolen);
		return -1;
	}
	/* fscrypt_hkdf_expand(): prefix "fscrypt\0" and the context byte. */
	memcpy(full_info, "fscrypt\0", 8);
	full_info[8] = ctx;
	if (infolen)
		memcpy(full_info + 9, info, infolen);

	kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
	if (!kdf)
		return fref_ossl_error("EVP_KDF_fetch(HKDF)");
	kctx = EVP_KDF_CTX_new(kdf);
	EVP_KDF_free(kdf);
	if (!kctx)
		return fref_ossl_error("EVP_KDF_CTX_new");
	/*
	 * No salt: RFC 5869 then uses HashLen zero bytes, which as an HMAC key
	 * is the same as the all-zero salt the kernel's hkdf_extract() uses.
	 */
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST,
						     (char *)"SHA512", 0);
	params[1] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY,
						      (void *)mk, mklen);
	params[2] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO,
						      full_info, 9 + infolen);
	params[3] = OSSL_PARAM_construct_end();
	ok = EVP_KDF_derive(kctx, out, outlen, params) == 1;
	EVP_KDF_CTX_free(kctx);
	return ok ? 0 : fref_ossl_error("EVP_KDF_derive(HKDF-SHA512)");
}

int fref_key_identifier(const uint8_t *mk, size_t mklen,
			uint8_t id[FREF_ID_SIZE])
{
	return fref_hkdf(mk, mklen, FREF_CTX_KEY_IDENTIFIER, NULL, 0, id,
			 FREF_ID_SIZE);
}

int fref_per_file_key(const uint8_t *mk, size_t mklen,
		      const uint8_t nonce[FREF_NONCE_SIZE], uint8_t *key,
		      size_t keylen)
{
	return fref_hkdf(mk, mklen, FREF_CTX_PER_FILE_ENC_KEY, nonce,
			 FREF_NONCE_SIZE, key, keylen);
}

int fref_per_extent_key(const uint8_t *mk, size_t mklen,
			const uint8_t nonce[FREF_NONCE_SIZE], uint8_t *key,
			size_t keylen)
{
	return fref_hkdf(mk, mklen, FREF_CTX_PER_EXTENT_KEY, nonce,
			 FREF_NONCE_SIZE, key, keylen);
}

/* One-shot en/decryption (@enc 1/0) of @len bytes with @cipher (no padding). */
static int fref_cipher(const EVP_CIPHER *cipher, const OSSL_PARAM *params,
		       const uint8_t *key, const uint8_t *iv, const uint8_t *in,
		       uint8_t *out, size_t len, int enc, const char *what)
{
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	int n1 = 0, n2 = 0, ok;

	if (!c)
		return fref_ossl_error(what);
	ok = EVP_CipherInit_ex2(c, cipher, key, iv, enc, params) == 1 &&
	     EVP_CIPHER_CTX_set_padding(c, 0) == 1 &&
	     EVP_CipherUpdate(c, out, &n1, in, (int)len) == 1 &&
	     EVP_CipherFinal_ex(c, out + n1, &n2) == 1;
	EVP_CIPHER_CTX_free(c);
	if (!ok)
		return fref_ossl_error(what);
	if ((size_t)(n1 + n2) != len) {
		printf("fscrypt_ref: %s produced %d bytes for %zu\n", what,
		       n1 + n2, len);
		return -1;
	}
	return 0;
}

static int fref_encrypt(const EVP_CIPHER *cipher, const OSSL_PARAM *params,
			const uint8_t *key, const uint8_t *iv, const uint8_t *in,
			uint8_t *out, size_t len, const char *what)
{
	return fref_cipher(cipher, params, key, iv, in, out, len, 1, what);
}

/* The XTS tweak le64(@lo) || le64(@hi). */
static void fref_tweak(uint8_t iv[FREF_AES_BLOCK], uint64_t lo, uint64_t hi)
{
	int i;

	for (i = 0; i < 8; i++) {
		iv[i] = (uint8_t)(lo >> (8 * i));
		iv[8 + i] = (uint8_t)(hi >> (8 * i));
	}
}

int fref_encrypt_block_tweak(const uint8_t key[FREF_XTS_KEY_SIZE], uint64_t lo,
			     uint64_t hi, const uint8_t *in, uint8_t *out,
			     size_t len)
{
	uint8_t iv[FREF_AES_BLOCK];

	/*
	 * fscrypt_generate_iv(): the DUN, little endian, then zeroes (@hi is
	 * nonzero only for the negative control of the 128-bit layout).
	 */
	fref_tweak(iv, lo, hi);
	return fref_encrypt(EVP_aes_256_xts(), NULL, key, iv, in, out, len,
			    "AES-256-XTS");
}

int fref_decrypt_block_tweak(const uint8_t key[FREF_XTS_KEY_SIZE], uint64_t lo,
			     uint64_t hi, const uint8_t *in, uint8_t *out,
			     size_t len)
{
	uint8_t iv[FREF_AES_BLOCK];

	fref_tweak(iv, lo, hi);
	return fref_cipher(EVP_aes_256_xts(), NULL, key, iv, in, out, len, 0,
			    "AES-256-XTS decryption");
}

uint64_t fref_extent_dun(uint64_t nr, uint64_t unit)
{
	return nr << 32 | unit;
}

int fref_encrypt_extent_unit(const uint8_t key[FREF_XTS_KEY_SIZE], uint64_t nr,
			     uint64_t unit, const uint8_t *in, uint8_t *out,
			     size_t len)
{
	if (nr >> 32 || unit >> 32) {
		printf("fscrypt_ref: extent %llu data unit %llu does not fit a 64-bit DUN\n",
		       (unsigned long long)nr, (unsigned long long)unit);
		return -1;
	}
	return fref_encrypt_block_tweak(key, fref_extent_dun(nr, unit), 0, in,
					out, len);
}

int fref_encrypt_block(const uint8_t key[FREF_XTS_KEY_SIZE], uint64_t lblk,
		       const uint8_t *in, uint8_t *out, size_t len)
{
	return fref_encrypt_block_tweak(key, lblk, 0, in, out, len);
}

size_t fref_fname_len(size_t namelen, uint8_t policy_flags)
{
	size_t padding = (size_t)4 << (policy_flags & FSCRYPT_POLICY_FLAGS_PAD_MASK);
	size_t len;

	if (namelen == 0 || namelen > FREF_NAME_MAX)
		return 0;
	/* __fscrypt_fname_encrypted_size() with max_len = NAME_MAX */
	len = namelen < FREF_FNAME_MIN_LEN ? FREF_FNAME_MIN_LEN : namelen;
	len = (len + padding - 1) / padding * padding;
	return len < FREF_NAME_MAX ? len : FREF_NAME_MAX;
}

int fref_encrypt_name(const uint8_t key[FREF_CTS_KEY_SIZE], const char *name,
		      size_t namelen, uint8_t policy_flags, uint8_t *out,
		      size_t *outlen)
{
	static const uint8_t iv[FREF_AES_BLOCK];
	uint8_t padded[FREF_NAME_MAX];
	OSSL_PARAM params[2];
	EVP_CIPHER *cts;
	size_t len = fref_fname_len(namelen, policy_flags);
	int ret;

	if (len == 0) {
		printf("fscrypt_ref: cannot encrypt a name of %zu bytes\n", namelen);
		return -1;
	}
	memset(padded, 0, sizeof(padded));
	memcpy(padded, name, namelen);
	cts = EVP_CIPHER_fetch(NULL, "AES-256-CBC-CTS", NULL);
	if (!cts)
		return fref_ossl_error("EVP_CIPHER_fetch(AES-256-CBC-CTS)");
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_CIPHER_PARAM_CTS_MODE,
						     (char *)"CS3", 0);
	params[1] = OSSL_PARAM_construct_end();
	ret = fref_encrypt(cts, params, key, iv, padded, out, len,
			   "AES-256-CBC-CTS (CS3)");
	EVP_CIPHER_free(cts);
	if (ret == 0)
		*outlen = len;
	return ret;
}

/*
 * CS3 by hand: CBC over the message zero-padded to whole blocks, then the
 * last two ciphertext blocks swapped and the (now last) block cut to the
 * length of the message's last partial block.
 */
static int fref_cts_by_hand(const uint8_t *key, const uint8_t *in,
			    uint8_t *out, size_t len)
{
	static const uint8_t iv[FREF_AES_BLOCK];
	uint8_t padded[FREF_NAME_MAX + FREF_AES_BLOCK] = { 0 };
	uint8_t cbc[sizeof(padded)];
	size_t nblocks = (len + FREF_AES_BLOCK - 1) / FREF_AES_BLOCK;
	size_t tail = len - (nblocks - 1) * FREF_AES_BLOCK;

	memcpy(padded, in, len);
	if (fref_encrypt(EVP_aes_256_cbc(), NULL, key, iv, padded, cbc,
			 nblocks * FREF_AES_BLOCK, "AES-256-CBC"))
		return -1;
	if (nblocks == 1) {
		memcpy(out, cbc, len);
		return 0;
	}
	memcpy(out, cbc, (nblocks - 2) * FREF_AES_BLOCK);
	memcpy(out + (nblocks - 2) * FREF_AES_BLOCK,
	       cbc + (nblocks - 1) * FREF_AES_BLOCK, FREF_AES_BLOCK);
	memcpy(out + (nblocks - 1) * FREF_AES_BLOCK,
	       cbc + (nblocks - 2) * FREF_AES_BLOCK, tail);
	return 0;
}

/*
 * XTS by hand (IEEE 1619): the first @nblocks AES blocks of @in under the
 * 64-byte @key with tweak @iv, from AES-256-ECB: T_0 = E_K2(iv),
 * C_j = E_K1(P_j ^ T_j) ^ T_j, T_j+1 = T_j * x (little-endian GF(2^128),
 * reduced by x^128 + x^7 + x^2 + x + 1).
 */
static int fref_xts_by_hand(const uint8_t *key, const uint8_t iv[FREF_AES_BLOCK],
			    const uint8_t *in, uint8_t *out, size_t nblocks)
{
	uint8_t t[FREF_AES_BLOCK], x[FREF_AES_BLOCK], y[FREF_AES_BLOCK];
	size_t j, i;
	int carry, c;

	if (fref_encrypt(EVP_aes_256_ecb(), NULL, key + 32, NULL, iv, t,
			 FREF_AES_BLOCK, "AES-256-ECB (tweak key)"))
		return -1;
	for (j = 0; j < nblocks; j++) {
		for (i = 0; i < FREF_AES_BLOCK; i++)
			x[i] = in[j * FREF_AES_BLOCK + i] ^ t[i];
		if (fref_encrypt(EVP_aes_256_ecb(), NULL, key, NULL, x, y,
				 FREF_AES_BLOCK, "AES-256-ECB (data key)"))
			return -1;
		for (i = 0; i < FREF_AES_BLOCK; i++)
			out[j * FREF_AES_BLOCK + i] = y[i] ^ t[i];
		/* t *= x */
		carry = 0;
		for (i = 0; i < FREF_AES_BLOCK; i++) {
			c = t[i] >> 7;
			t[i] = (uint8_t)((t[i] << 1) | carry);
			carry = c;
		}
		if (carry)
			t[0] ^= 0x87;
	}
	return 0;
}

/*
 * fref_encrypt_block_tweak() against XTS by hand, for tweaks written out
 * byte by byte (the on-disk format's layout, as the kernel's KUnit
 * test_tweak_layout has it): high half zero, small, and with every byte
 * distinct, so that swapped or big-endian halves would show.
 */
static int fref_selftest_tweak(void)
{
	static const struct {
		uint64_t lo, hi;
		uint8_t iv[FREF_AES_BLOCK];
	} tw[] = {
		{ 0, 0, { 0 } },
		{ 5, 0, { 5 } },
		{ 3, 1, { 3, 0, 0, 0, 0, 0, 0, 0, 1 } },
		{ 0, 0x0102, { 0, 0, 0, 0, 0, 0, 0, 0, 2, 1 } },
		{ 0x0102030405060708ULL, 0x1112131415161718ULL,
		  { 8, 7, 6, 5, 4, 3, 2, 1, 0x18, 0x17, 0x16, 0x15, 0x14, 0x13,
		    0x12, 0x11 } },
	};
	enum { UNIT = 512, CHECKED = 4 };
	uint8_t key[FREF_XTS_KEY_SIZE], in[UNIT], a[UNIT], b[UNIT];
	size_t i, k;

	for (i = 0; i < sizeof(key); i++)
		key[i] = (uint8_t)(0x3c ^ (i * 13));
	for (i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)(i * 29 + 1);
	for (k = 0; k < sizeof(tw) / sizeof(tw[0]); k++) {
		if (fref_encrypt_block_tweak(key, tw[k].lo, tw[k].hi, in, a, UNIT) ||
		    fref_xts_by_hand(key, tw[k].iv, in, b, CHECKED))
			return -1;
		if (memcmp(a, b, CHECKED * FREF_AES_BLOCK) != 0) {
			printf("fscrypt_ref selftest: AES-256-XTS with tweak (%llu, %llu): libcrypto and XTS by hand from AES-256-ECB differ\n",
			       (unsigned long long)tw[k].lo,
			       (unsigned long long)tw[k].hi);
			return -1;
		}
		if (tw[k].hi == 0 &&
		    (fref_encrypt_block(key, tw[k].lo, in, b, UNIT) ||
		     memcmp(a, b, UNIT) != 0)) {
			printf("fscrypt_ref selftest: fref_encrypt_block(%llu) is not the tweak (%llu, 0)\n",
			       (unsigned long long)tw[k].lo,
			       (unsigned long long)tw[k].lo);
			return -1;
		}
	}
	/*
	 * The 64-bit DUN of key groups, written out: extent 0x0102, data unit
	 * 5 is le64(0x0000010200000005) then zeroes; a data unit or extent
	 * number of 2^32 is refused.
	 */
	{
		static const uint8_t iv[FREF_AES_BLOCK] = { 5, 0, 0, 0, 2, 1 };

		if (fref_encrypt_extent_unit(key, 0x0102, 5, in, a, UNIT) ||
		    fref_xts_by_hand(key, iv, in, b, CHECKED))
			return -1;
		if (memcmp(a, b, CHECKED * FREF_AES_BLOCK) != 0) {
			printf("fscrypt_ref selftest: extent 0x102 data unit 5 is not under the DUN 0x10200000005\n");
			return -1;
		}
		if (fref_encrypt_extent_unit(key, 0, 1ULL << 32, in, a, UNIT) == 0 ||
		    fref_encrypt_extent_unit(key, 1ULL << 32, 0, in, a, UNIT) == 0) {
			printf("fscrypt_ref selftest: a data unit or extent number of 2^32 was accepted\n");
			return -1;
		}
	}
	/* the high half matters */
	if (fref_encrypt_block_tweak(key, 3, 0, in, a, UNIT) ||
	    fref_encrypt_block_tweak(key, 3, 1, in, b, UNIT))
		return -1;
	if (memcmp(a, b, UNIT) == 0) {
		printf("fscrypt_ref selftest: the tweak's high half changes nothing\n");
		return -1;
	}
	return 0;
}

int fref_selftest(void)
{
	static const size_t lens[] = { 16, 32, 40, 255 };
	uint8_t key[FREF_CTS_KEY_SIZE], a[FREF_NAME_MAX], b[FREF_NAME_MAX];
	char name[FREF_NAME_MAX];
	size_t i, j, got;

	for (i = 0; i < sizeof(key); i++)
		key[i] = (uint8_t)(0xa5 ^ (i * 7));
	for (i = 0; i < sizeof(name); i++)
		name[i] = (char)('a' + i % 26);
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		/* PAD_4 keeps the length as is for these lengths (255: capped). */
		if (fref_encrypt_name(key, name, lens[i],
				      FSCRYPT_POLICY_FLAGS_PAD_4, a, &got) ||
		    fref_cts_by_hand(key, (const uint8_t *)name, b, lens[i]))
			return -1;
		if (got != lens[i]) {
			printf("fscrypt_ref selftest: name of %zu bytes encrypted to %zu bytes\n",
			       lens[i], got);
			return -1;
		}
		for (j = 0; j < got; j++) {
			if (a[j] != b[j]) {
				printf("fscrypt_ref selftest: CTS-CS3 of %zu bytes: libcrypto and the hand-made CBC+swap differ at byte %zu\n",
				       got, j);
				return -1;
			}
		}
	}
	return fref_selftest_tweak();
}
