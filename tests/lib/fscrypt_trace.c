// SPDX-License-Identifier: GPL-2.0
/* Counting the series' fscrypt tracepoints; see fscrypt_trace.h. */
#include "fscrypt_trace.h"
#include "lab.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TRACEFS "/sys/kernel/tracing"

static const char *const events[] = {
	"fscrypt_setup_info", "fscrypt_derive_key", "fscrypt_crypt_blocks",
	"fscrypt_extent_lookup", "fscrypt_extent_key_setup",
};
#define NEVENTS (sizeof(events) / sizeof(events[0]))

static int put(const char *path, const char *v)
{
	return write_file(path, v, strlen(v));
}

static int switch_events(const char *v)
{
	char path[256];
	size_t i;
	int ret = 0;

	for (i = 0; i < NEVENTS; i++) {
		snprintf(path, sizeof(path), TRACEFS "/events/fscrypt/%s/enable", events[i]);
		if (put(path, v))
			ret = -1;
	}
	return ret;
}

/* tracing_on as lab_trace_start() found it, for lab_trace_stop() to restore */
static char tracing_was[2] = "1";

int lab_trace_start(void)
{
	size_t len;
	char *was;
	int fd;

	if (access(TRACEFS "/events/fscrypt/fscrypt_extent_lookup", F_OK))
		return -1;
	/* tracing_on is global: the tests that run after this one expect it kept */
	was = read_file(TRACEFS "/tracing_on", &len);
	if (was && len && (was[0] == '0' || was[0] == '1'))
		tracing_was[0] = was[0];
	free(was);
	if (put(TRACEFS "/tracing_on", "0"))
		return -1;
	/* opening "trace" for writing with O_TRUNC empties the buffer */
	fd = open(TRACEFS "/trace", O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return -1;
	close(fd);
	if (switch_events("1"))
		return -1;
	return put(TRACEFS "/tracing_on", "1");
}

/* The unsigned number after "@key=" in @line, or 0. */
static unsigned long long field(const char *line, const char *key)
{
	const char *p = strstr(line, key);

	return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

int lab_trace_stop(struct lab_trace_count *c)
{
	const char *next, *l;
	char line[1024];
	size_t len, i;
	char *text;
	unsigned long long in_buf = 0, written = 0;

	memset(c, 0, sizeof(*c));
	put(TRACEFS "/tracing_on", "0");
	switch_events("0");
	text = read_file(TRACEFS "/trace", &len);
	put(TRACEFS "/tracing_on", tracing_was);
	if (!text)
		return -1;
	next = text;
	while (lab_next_line(&next, line, sizeof(line))) {
		l = line;
		if (line[0] == '#') {
			/* "# entries-in-buffer/entries-written: 12/12   #P:2" */
			if (sscanf(line, "# entries-in-buffer/entries-written: %llu/%llu",
				   &in_buf, &written) == 2 && written > in_buf)
				c->lost = written - in_buf;
			continue;
		}
		if (strstr(l, " ret=") && !strstr(l, " ret=0"))
			c->errors++;
		if (strstr(l, " fscrypt_setup_info:")) {
			c->setup_info++;
		} else if (strstr(l, " fscrypt_derive_key:")) {
			c->derive_key++;
		} else if (strstr(l, " fscrypt_crypt_blocks:")) {
			if (strstr(l, "dir=decrypt")) {
				c->decrypt++;
				c->blocks_decrypted += field(l, " nr_blocks=");
			} else {
				c->encrypt++;
			}
		} else if (strstr(l, " fscrypt_extent_lookup:")) {
			uint64_t id = field(l, " key_id=");

			c->extent_lookup++;
			for (i = 0; i < c->extent_keys && c->key_ids[i] != id; i++)
				;
			if (i == c->extent_keys && i < LAB_TRACE_MAX_KEYS)
				c->key_ids[c->extent_keys++] = id;
		} else if (strstr(l, " fscrypt_extent_key_setup:")) {
			c->extent_key_setup++;
		}
	}
	free(text);
	return 0;
}

char *lab_trace_str(char *out, size_t size, const struct lab_trace_count *c)
{
	snprintf(out, size,
		 "%lu decrypt events (%lu blocks), %lu extent lookups (%lu keys), %lu key derivations, %lu key setups, %lu extent key setups%s",
		 c->decrypt, c->blocks_decrypted, c->extent_lookup, c->extent_keys,
		 c->derive_key, c->setup_info, c->extent_key_setup,
		 c->lost ? " (events lost)" : "");
	return out;
}
