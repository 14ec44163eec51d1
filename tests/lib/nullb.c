// SPDX-License-Identifier: GPL-2.0
/* A zoned null_blk device for the tests: see nullb.h. */
#include "nullb.h"
#include "lab.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONFIGFS "/sys/kernel/config"
#define NULLB_DIR CONFIGFS "/nullb"

static char nullb[PATH_MAX];	/* configfs directory of the device */
static char nullb_dev[PATH_MAX];
static int nullb_powered;

static int nullb_attr(const char *attr, const char *val)
{
	char path[PATH_MAX];
	size_t len = strlen(val);
	int fd, ret = 0;

	PATHF(path, "%s/%s", nullb, attr);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (write(fd, val, len) != (ssize_t)len)
		ret = -1;
	close(fd);
	return ret;
}

void lab_nullb_remove(void)
{
	if (!nullb[0])
		return;
	if (nullb_powered && nullb_attr("power", "0") < 0)
		printf("# could not power off %s: " LAB_ERR_FMT "\n", nullb,
		       LAB_ERR_ARGS(errno));
	nullb_powered = 0;
	if (rmdir(nullb) < 0)
		printf("# could not remove %s: " LAB_ERR_FMT "\n", nullb,
		       LAB_ERR_ARGS(errno));
	nullb[0] = '\0';
	nullb_dev[0] = '\0';
}

const char *lab_nullb_zoned(const char *name, unsigned int size_mb,
			    unsigned int zone_mb, char *why, size_t why_size)
{
	static int registered;
	char size[16], zone[16], path[PATH_MAX], *text;
	const struct {
		const char *attr, *val;
	} attrs[] = {
		{ "size", size },	/* MiB */
		{ "blocksize", "4096" },
		{ "memory_backed", "1" },
		{ "zoned", "1" },
		{ "zone_size", zone },	/* MiB */
		{ "zone_nr_conv", "0" },
	};
	struct stat st;
	size_t i, len;

	if (nullb[0])
		lab_die("lab_nullb_zoned: %s exists already", nullb);
	snprintf(size, sizeof(size), "%u", size_mb);
	snprintf(zone, sizeof(zone), "%u", zone_mb);
	if (stat(NULLB_DIR, &st) < 0) {
		if (stat(CONFIGFS, &st) == 0 &&
		    mount("configfs", CONFIGFS, "configfs", 0, NULL) < 0 &&
		    errno != EBUSY)
			printf("# mount configfs: " LAB_ERR_FMT "\n",
			       LAB_ERR_ARGS(errno));
		if (stat(NULLB_DIR, &st) < 0) {
			snprintf(why, why_size,
				 "no %s (kernel without CONFIG_BLK_DEV_NULL_BLK or CONFIG_CONFIGFS_FS): no zoned device to test on",
				 NULLB_DIR);
			return NULL;
		}
	}

	PATHF(nullb, "%s/%s", NULLB_DIR, name);
	if (mkdir(nullb, 0755) < 0) {
		int e = errno;

		nullb[0] = '\0';
		lab_die("mkdir %s/%s: " LAB_ERR_FMT, NULLB_DIR, name,
			LAB_ERR_ARGS(e));
	}
	if (!registered) {
		atexit(lab_nullb_remove);
		registered = 1;
	}
	for (i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++)
		if (nullb_attr(attrs[i].attr, attrs[i].val) < 0)
			lab_die("null_blk %s=%s: " LAB_ERR_FMT, attrs[i].attr,
				attrs[i].val, LAB_ERR_ARGS(errno));
	if (nullb_attr("power", "1") < 0) {
		int e = errno;

		if (e != EOPNOTSUPP)
			lab_die("null_blk power=1: " LAB_ERR_FMT, LAB_ERR_ARGS(e));
		snprintf(why, why_size,
			 "null_blk refuses zoned=1 (" LAB_ERR_FMT "): kernel without CONFIG_BLK_DEV_ZONED",
			 LAB_ERR_ARGS(e));
		lab_nullb_remove();
		return NULL;
	}
	nullb_powered = 1;

	/*
	 * The disk is named after the configfs directory on this kernel
	 * ("null_blk: disk <name> created"); older ones named it
	 * nullb<index>.
	 */
	PATHF(path, "/sys/block/%s", name);
	if (access(path, F_OK) == 0) {
		PATHF(nullb_dev, "/dev/%s", name);
	} else {
		PATHF(path, "%s/index", nullb);
		text = read_file(path, &len);
		if (!text)
			lab_die("read %s: " LAB_ERR_FMT, path,
				LAB_ERR_ARGS(errno));
		PATHF(nullb_dev, "/dev/nullb%d", atoi(text));
		free(text);
	}
	PATHF(path, "/sys/block/%s/queue/zoned", nullb_dev + 5);
	text = read_file(path, &len);
	if (!text)
		lab_die("read %s: " LAB_ERR_FMT, path, LAB_ERR_ARGS(errno));
	printf("# %s: %u MiB, %u MiB zones, zoned=%s", nullb_dev, size_mb,
	       zone_mb, text);
	if (strncmp(text, "host-managed", 12))
		lab_die("%s is not host-managed (%s); nothing to test",
			nullb_dev, text);
	free(text);
	return nullb_dev;
}
