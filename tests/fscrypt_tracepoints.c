// SPDX-License-Identifier: GPL-2.0
/*
 * The fscrypt tracepoints (patches/feature/0001): enable them through tracefs, do
 * encrypted I/O on ext4, and check that every event arrived with fields that
 * match what was done:
 *
 *   fscrypt_setup_info    for the new file: v2 policy, AES-256-XTS, key found,
 *                         ret 0, a nonzero duration; and, after the key is
 *                         removed, key_found=0 with ret=-ENOKEY;
 *   fscrypt_derive_key    the per-file key (HKDF context 2), 64 bytes, ret 0;
 *   fscrypt_crypt_blocks  encryption and decryption covering exactly the
 *                         file's blocks 0..NBLOCKS-1;
 *   fscrypt_free_info     for the file once its inode is evicted (umount).
 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fscrypt.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fscrypt_util.h"
#include "lab.h"

#define TRACEFS "/sys/kernel/tracing"
#define NBLOCKS 5
#define BLOCK 4096

static void tracing(int on)
{
	if (write_file(TRACEFS "/events/fscrypt/enable", on ? "1" : "0", 1))
		lab_die("cannot %s fscrypt events in " TRACEFS ": %s",
			on ? "enable" : "disable", strerror(errno));
	/* tracing_on is global, and an earlier test may have left it off */
	if (on && write_file(TRACEFS "/tracing_on", "1", 1))
		lab_die("cannot turn tracing on in " TRACEFS ": %s",
			strerror(errno));
}

/* open() the entry of @dir whose inode is @ino; -1 with errno on failure. */
static int open_by_ino(const char *dir, ino_t ino)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[1024];

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (de->d_ino == ino)
			break;
	if (!de) {
		closedir(d);
		errno = ENOENT;
		return -1;
	}
	snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
	closedir(d);
	return open(path, O_RDONLY);
}

/* What the trace says about one inode. */
struct seen {
	int setup_ok;		/* setup_info: v2, XTS, key found, ret 0, duration > 0 */
	int setup_nokey;	/* setup_info: key_found=0 ret=-ENOKEY */
	int derive_file_key;	/* derive_key context=2 key_len=64 ret=0 */
	int derive_bad;		/* derive_key with ret != 0 */
	int freed;		/* free_info */
	uint64_t enc_blocks, dec_blocks;	/* blocks en/decrypted */
	uint64_t enc_mask, dec_mask;		/* which lblks (bit per block) */
	int bad_fields;		/* an event for this inode with impossible values */
};

static void parse_trace(const char *text, unsigned long ino, struct seen *s)
{
	const char *next = text;
	char line[512];

	/* One NUL-terminated line at a time, so strstr() cannot look past it. */
	while (lab_next_line(&next, line, sizeof(line))) {
		const char *ev;
		unsigned long e_ino;
		unsigned int ver, mode, key_found, ctx, info_len, key_len, nr;
		int ret, maj, min;
		unsigned long long dur, lblk;
		char dir[16];

		if ((ev = strstr(line, "fscrypt_setup_info: ")) &&
		    sscanf(ev, "fscrypt_setup_info: dev=%d:%d ino=%lu policy_version=%u contents_mode=%u key_found=%u ret=%d duration_ns=%llu",
			   &maj, &min, &e_ino, &ver, &mode, &key_found, &ret, &dur) == 8) {
			if (e_ino == ino && ver == 2 && mode == FSCRYPT_MODE_AES_256_XTS &&
			    key_found == 1 && ret == 0 && dur > 0)
				s->setup_ok++;
			if (e_ino == ino && key_found == 0 && ret == -ENOKEY)
				s->setup_nokey++;
		} else if ((ev = strstr(line, "fscrypt_derive_key: ")) &&
			   sscanf(ev, "fscrypt_derive_key: context=%u info_len=%u key_len=%u ret=%d duration_ns=%llu",
				  &ctx, &info_len, &key_len, &ret, &dur) == 5) {
			/* HKDF_CONTEXT_PER_FILE_ENC_KEY = 2; info = 16-byte nonce */
			if (ctx == 2 && info_len == 16 && key_len == 64 && ret == 0 && dur > 0)
				s->derive_file_key++;
			if (ret != 0)
				s->derive_bad++;
		} else if ((ev = strstr(line, "fscrypt_crypt_blocks: ")) &&
			   sscanf(ev, "fscrypt_crypt_blocks: dev=%d:%d ino=%lu lblk=%llu nr_blocks=%u dir=%15s ret=%d duration_ns=%llu",
				  &maj, &min, &e_ino, &lblk, &nr, dir, &ret, &dur) == 8) {
			if (e_ino == ino) {
				int enc = !strcmp(dir, "encrypt");

				if (ret != 0 || nr == 0 || lblk + nr > 64 ||
				    (!enc && strcmp(dir, "decrypt")))
					s->bad_fields++;
				else
					for (unsigned int i = 0; i < nr; i++) {
						if (enc)
							s->enc_mask |= 1ULL << (lblk + i);
						else
							s->dec_mask |= 1ULL << (lblk + i);
					}
				if (enc)
					s->enc_blocks += nr;
				else
					s->dec_blocks += nr;
			}
		} else if ((ev = strstr(line, "fscrypt_free_info: ")) &&
			   sscanf(ev, "fscrypt_free_info: dev=%d:%d ino=%lu contents_mode=%u",
				  &maj, &min, &e_ino, &mode) == 4) {
			if (e_ino == ino) {
				if (mode != FSCRYPT_MODE_AES_256_XTS)
					s->bad_fields++;
				s->freed++;
			}
		}
	}
}

int main(void)
{
	const char *dev = lab_env("SCRATCH_DEV"), *mnt = lab_env("SCRATCH_MNT");
	uint8_t id[FSCRYPT_KEY_IDENTIFIER_SIZE];
	static uint8_t data[NBLOCKS * BLOCK];
	char dir[512], file[512];
	struct seen s = { 0 };
	const uint64_t all = (1ULL << NBLOCKS) - 1;
	struct stat st;
	char *trace;
	size_t len;
	int fd;

	if (access(TRACEFS "/events/fscrypt", F_OK))
		lab_die("no fscrypt events in " TRACEFS " (is patches/feature/0001 applied, tracefs mounted?)");
	if (lab_mkfs("mkfs.ext4 -q -F -O encrypt", dev) || lab_mount(dev, mnt, "ext4", NULL))
		lab_die("cannot make and mount ext4 on %s", dev);
	PATHF(dir, "%s/enc", mnt);
	PATHF(file, "%s/enc/file", mnt);
	if (mkdir(dir, 0755))
		lab_die("mkdir %s: %s", dir, strerror(errno));
	if (lab_add_key(mnt, 1, id) || lab_set_policy(dir, id))
		lab_die("cannot add a key and set a policy on %s: %s", dir, strerror(errno));

	write_file(TRACEFS "/trace", "", 0);	/* clears the buffer */
	tracing(1);
	fill_pattern(data, sizeof(data), 42);
	CHECK_OK(write_file(file, data, sizeof(data)), "write %s", file);
	CHECK_OK(fsync_path(file), "fsync %s", file);
	CHECK_OK(stat(file, &st), "stat %s", file);
	/*
	 * Evict the inode (free_info) by remounting, which also drops the
	 * filesystem keyring; then read the file back (setup + decrypt).
	 */
	CHECK_OK(lab_umount(mnt), "umount %s", mnt);
	if (lab_mount(dev, mnt, "ext4", NULL))
		lab_die("cannot remount %s", dev);
	CHECK_OK(lab_add_key(mnt, 1, id), "re-add key");
	CHECK_FILE_EQUALS(file, data, sizeof(data));
	/* Without the key, opening the file sets up an info with no key. */
	CHECK_OK(lab_remove_key(mnt, id, NULL), "remove key");
	/* Without the key the file has a no-key name: find it by inode. */
	fd = open_by_ino(dir, st.st_ino);
	CHECK(fd < 0 && errno == ENOKEY, "open without key: fd %d errno " LAB_ERR_FMT,
	      fd, LAB_ERR_ARGS(errno));
	if (fd >= 0)
		close(fd);
	tracing(0);

	trace = read_file(TRACEFS "/trace", &len);
	if (!trace)
		lab_die("read " TRACEFS "/trace: %s", strerror(errno));
	parse_trace(trace, st.st_ino, &s);
	printf("ino %lu: setup_ok=%d setup_nokey=%d derive_file_key=%d freed=%d enc_blocks=%" PRIu64
	       " dec_blocks=%" PRIu64 " bad=%d\n", (unsigned long)st.st_ino, s.setup_ok,
	       s.setup_nokey, s.derive_file_key, s.freed, s.enc_blocks, s.dec_blocks,
	       s.bad_fields);

	/* At creation ext4 has not numbered the inode yet (ino=0): count the reopen. */
	CHECK(s.setup_ok >= 1, "fscrypt_setup_info with key: %d events, want >= 1 (reopen)",
	      s.setup_ok);
	CHECK(s.setup_nokey >= 1, "fscrypt_setup_info without key: %d events, want >= 1",
	      s.setup_nokey);
	CHECK(s.derive_file_key >= 2, "fscrypt_derive_key of a per-file key: %d events, want >= 2",
	      s.derive_file_key);
	CHECK(s.derive_bad == 0, "fscrypt_derive_key reported %d failures", s.derive_bad);
	CHECK(s.freed >= 1, "fscrypt_free_info: %d events, want >= 1 (umount)", s.freed);
	CHECK(s.enc_mask == all, "encrypted blocks mask %#" PRIx64 ", want %#" PRIx64,
	      s.enc_mask, all);
	CHECK(s.dec_mask == all, "decrypted blocks mask %#" PRIx64 ", want %#" PRIx64,
	      s.dec_mask, all);
	CHECK(s.enc_blocks == NBLOCKS, "blocks encrypted: %" PRIu64 ", want %d",
	      s.enc_blocks, NBLOCKS);
	CHECK(s.bad_fields == 0, "%d events with impossible fields", s.bad_fields);
	if (lab_failures)
		printf("--- trace ---\n%s", trace);
	free(trace);
	lab_umount(mnt);
	return lab_result("fscrypt_tracepoints");
}
