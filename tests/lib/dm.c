// SPDX-License-Identifier: GPL-2.0
/*
 * dm.c - device-mapper through /dev/mapper/control; see dm.h.
 */
#include "dm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <linux/dm-ioctl.h>
#include <linux/fs.h>

#include "lab.h"

#define CONTROL "/dev/mapper/control"

/* The control node: devtmpfs makes it when the kernel has device-mapper. */
static int control_fd(void)
{
	int fd = open(CONTROL, O_RDWR | O_CLOEXEC);

	if (fd < 0 && errno == ENOENT) {
		/* no devtmpfs node: make it (misc major 10, minor 236) */
		mkdir("/dev/mapper", 0755);
		if (mknod(CONTROL, S_IFCHR | 0600, makedev(10, 236)) == 0)
			fd = open(CONTROL, O_RDWR | O_CLOEXEC);
		else
			errno = ENOENT;
	}
	return fd;
}

/* A zeroed request of @size bytes (at least the header) for @name. */
static struct dm_ioctl *request(const char *name, size_t size)
{
	struct dm_ioctl *io;

	if (size < sizeof(*io))
		size = sizeof(*io);
	io = calloc(1, size);
	if (!io)
		lab_die("out of memory");
	io->version[0] = DM_VERSION_MAJOR;
	io->version[1] = 0;
	io->version[2] = 0;
	io->data_size = size;
	io->data_start = sizeof(*io);
	if (name)
		snprintf(io->name, sizeof(io->name), "%s", name);
	return io;
}

/* ioctl @cmd of @io on the control node; prints what failed. */
static int dm_call(unsigned long cmd, const char *what, struct dm_ioctl *io)
{
	int fd = control_fd(), r, e;

	if (fd < 0) {
		e = errno;
		printf("dm: cannot open " CONTROL ": " LAB_ERR_FMT "\n", LAB_ERR_ARGS(e));
		errno = e;
		return -1;
	}
	r = ioctl(fd, cmd, io);
	e = errno;
	close(fd);
	if (r != 0) {
		printf("dm: %s of %s failed: " LAB_ERR_FMT "\n", what,
		       io->name[0] ? io->name : "-", LAB_ERR_ARGS(e));
		errno = e;
		return -1;
	}
	return 0;
}

int lab_dm_available(char *why, size_t size)
{
	struct dm_ioctl *io = request(NULL, 0);
	int fd = control_fd(), r, e;

	if (fd < 0) {
		snprintf(why, size, "no " CONTROL " (%s): the kernel has no device-mapper (CONFIG_BLK_DEV_DM)",
			 strerror(errno));
		free(io);
		return 0;
	}
	r = ioctl(fd, DM_VERSION, io);
	e = errno;
	close(fd);
	if (r != 0)
		snprintf(why, size, "DM_VERSION failed: %s", strerror(e));
	else
		snprintf(why, size, "device-mapper ioctl %u.%u.%u", io->version[0],
			 io->version[1], io->version[2]);
	free(io);
	return r == 0;
}

void lab_dm_path(const char *name, char *out, size_t size)
{
	lab_pathf(out, size, "/dev/mapper/%s", name);
}

int lab_dm_devno(const char *path, char *out, size_t size)
{
	struct stat st;

	if (stat(path, &st) != 0)
		return -1;
	if (!S_ISBLK(st.st_mode)) {
		errno = ENOTBLK;
		return -1;
	}
	snprintf(out, size, "%u:%u", major(st.st_rdev), minor(st.st_rdev));
	return 0;
}

long long lab_dm_sectors(const char *path)
{
	uint64_t bytes;
	int fd = open(path, O_RDONLY | O_CLOEXEC), e;

	if (fd < 0)
		return -1;
	if (ioctl(fd, BLKGETSIZE64, &bytes) != 0) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	close(fd);
	return (long long)(bytes >> 9);
}

static int remove_dev(const char *name, int quiet)
{
	struct dm_ioctl *io;
	char node[128];
	int i, r = -1, e = 0, fd;

	for (i = 0; i < 50; i++) {
		io = request(name, 0);
		fd = control_fd();
		if (fd < 0) {
			e = errno;
			free(io);
			break;
		}
		r = ioctl(fd, DM_DEV_REMOVE, io);
		e = errno;
		close(fd);
		free(io);
		if (r == 0 || e != EBUSY)
			break;
		usleep(100 * 1000);
	}
	lab_dm_path(name, node, sizeof(node));
	if (r == 0 || e == ENXIO)
		unlink(node);
	if (r != 0 && !quiet)
		printf("dm: DM_DEV_REMOVE of %s failed: " LAB_ERR_FMT "\n", name,
		       LAB_ERR_ARGS(e));
	errno = e;
	return r;
}

int lab_dm_remove(const char *name)
{
	return remove_dev(name, 0);
}

int lab_dm_create(const char *name, const struct lab_dm_target *t, int n,
		  dev_t *devt)
{
	struct dm_ioctl *io;
	size_t size = sizeof(*io), off;
	char node[128];
	dev_t dev;
	int i, e;

	/* DM_DEV_CREATE: an empty device; the answer has its number */
	io = request(name, 0);
	if (dm_call(DM_DEV_CREATE, "DM_DEV_CREATE", io)) {
		free(io);
		return -1;
	}
	dev = makedev(major(io->dev), minor(io->dev));
	free(io);

	/* DM_TABLE_LOAD: the targets, each spec followed by its parameters */
	for (i = 0; i < n; i++)
		size += (sizeof(struct dm_target_spec) + strlen(t[i].params) + 1 + 7) & ~(size_t)7;
	io = request(name, size);
	io->target_count = n;
	off = sizeof(*io);
	for (i = 0; i < n; i++) {
		struct dm_target_spec *s = (void *)((char *)io + off);
		size_t len = (sizeof(*s) + strlen(t[i].params) + 1 + 7) & ~(size_t)7;

		s->sector_start = t[i].start;
		s->length = t[i].len;
		snprintf(s->target_type, sizeof(s->target_type), "%s", t[i].type);
		strcpy((char *)(s + 1), t[i].params);
		s->next = len;
		off += len;
	}
	if (dm_call(DM_TABLE_LOAD, "DM_TABLE_LOAD", io)) {
		e = errno;
		printf("dm: the table of %s was:", name);
		for (i = 0; i < n; i++)
			printf(" [%llu +%llu %s %s]", (unsigned long long)t[i].start,
			       (unsigned long long)t[i].len, t[i].type, t[i].params);
		printf("\n");
		free(io);
		remove_dev(name, 1);
		errno = e;
		return -1;
	}
	free(io);

	/* DM_DEV_SUSPEND without DM_SUSPEND_FLAG: resume, the table goes live */
	io = request(name, 0);
	if (dm_call(DM_DEV_SUSPEND, "DM_DEV_SUSPEND (resume)", io)) {
		e = errno;
		free(io);
		remove_dev(name, 1);
		errno = e;
		return -1;
	}
	free(io);

	/* no udev in the guest: the node is ours to make */
	mkdir("/dev/mapper", 0755);
	lab_dm_path(name, node, sizeof(node));
	unlink(node);
	if (mknod(node, S_IFBLK | 0600, dev) != 0) {
		e = errno;
		printf("dm: mknod %s: " LAB_ERR_FMT "\n", node, LAB_ERR_ARGS(e));
		remove_dev(name, 1);
		errno = e;
		return -1;
	}
	if (devt)
		*devt = dev;
	return 0;
}

int lab_dm_message(const char *name, const char *msg)
{
	size_t size = sizeof(struct dm_ioctl) + sizeof(struct dm_target_msg) + strlen(msg) + 1;
	struct dm_ioctl *io = request(name, size);
	struct dm_target_msg *m = (void *)((char *)io + io->data_start);
	int r;

	m->sector = 0;
	strcpy(m->message, msg);
	r = dm_call(DM_TARGET_MSG, "DM_TARGET_MSG", io);
	free(io);
	return r;
}

int lab_dm_status(const char *name, char *out, size_t size)
{
	struct dm_ioctl *io = request(name, 16384);
	struct dm_target_spec *s;

	if (dm_call(DM_TABLE_STATUS, "DM_TABLE_STATUS", io)) {
		free(io);
		return -1;
	}
	if (io->target_count < 1 || (io->flags & DM_BUFFER_FULL_FLAG)) {
		free(io);
		errno = EOVERFLOW;
		return -1;
	}
	s = (void *)((char *)io + io->data_start);
	snprintf(out, size, "%s", (char *)(s + 1));
	free(io);
	return 0;
}
