/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A zoned block device for the tests: a memory-backed, host-managed null_blk
 * device made through configfs (CONFIG_BLK_DEV_NULL_BLK, CONFIG_CONFIGFS_FS,
 * CONFIG_BLK_DEV_ZONED in patches/config).  mkfs.btrfs turns zoned mode on
 * by itself on such a device.
 */
#ifndef LAB_NULLB_H
#define LAB_NULLB_H

#include <stddef.h>

/*
 * Make the device /sys/kernel/config/nullb/@name: @size_mb MiB, zones of
 * @zone_mb MiB, no conventional zones, 4 KiB blocks.  Returns its /dev path
 * (static storage), or NULL with the reason in @why when the kernel cannot
 * make a zoned null_blk device (no null_blk or configfs, no
 * CONFIG_BLK_DEV_ZONED); dies on other errors.  An exit handler removes the
 * device.  One device at a time.
 */
const char *lab_nullb_zoned(const char *name, unsigned int size_mb,
			    unsigned int zone_mb, char *why, size_t why_size);

/* Power off and remove the device of lab_nullb_zoned(), if any. */
void lab_nullb_remove(void);

#endif /* LAB_NULLB_H */
