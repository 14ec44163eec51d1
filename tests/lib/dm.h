/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm.h - device-mapper through its ioctl interface (/dev/mapper/control,
 * <linux/dm-ioctl.h>), for guest tests: the image has no dmsetup and no
 * udev, so the helpers also make the device node /dev/mapper/<name>
 * themselves (and remove it with the device).
 *
 * A device is made in three ioctls (DM_DEV_CREATE, DM_TABLE_LOAD, and
 * DM_DEV_SUSPEND without DM_SUSPEND_FLAG, which resumes the device and makes
 * the loaded table live), messaged with DM_TARGET_MSG (dm-log-writes's
 * "mark <name>"), asked with DM_TABLE_STATUS, removed with DM_DEV_REMOVE.
 *
 * Return convention as in lab.h: 0 on success, -1 with errno set (and a
 * message printed naming the device and the ioctl).
 */
#ifndef LAB_DM_H
#define LAB_DM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One line of a table: @len sectors from @start, target @type, @params. */
struct lab_dm_target {
	uint64_t start;
	uint64_t len;
	const char *type;	/* "linear", "log-writes", "snapshot", ... */
	const char *params;	/* e.g. "254:0 2048" */
};

/* Is device-mapper there (/dev/mapper/control answers DM_VERSION)? */
int lab_dm_available(char *why, size_t size);

/*
 * Make device @name with the table @t[0..@n-1], live, and its node
 * /dev/mapper/@name; its device number goes to *@devt if not NULL.  On a
 * failure after DM_DEV_CREATE the half-made device is removed again.
 */
int lab_dm_create(const char *name, const struct lab_dm_target *t, int n,
		  dev_t *devt);

/* DM_TARGET_MSG @msg (e.g. "mark fsync-3") to the target at sector 0. */
int lab_dm_message(const char *name, const char *msg);

/* The INFO status of the first target of @name into @out[@size]. */
int lab_dm_status(const char *name, char *out, size_t size);

/*
 * DM_DEV_REMOVE @name (retried for a while on EBUSY: an unmount may
 * still hold it) and unlink its node.
 */
int lab_dm_remove(const char *name);

/* "/dev/mapper/@name" into @out[@size]. */
void lab_dm_path(const char *name, char *out, size_t size);

/* "major:minor" of the block device @path, as a table names it. */
int lab_dm_devno(const char *path, char *out, size_t size);

/* Size of the block device @path in 512-byte sectors, or -1 (errno set). */
long long lab_dm_sectors(const char *path);

#endif /* LAB_DM_H */
