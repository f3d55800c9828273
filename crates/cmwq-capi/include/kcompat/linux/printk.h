/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* kcompat: printk and pr_*. Info and below go to stdout, warnings and worse
 * to stderr; log levels are not printed. pr_debug prints nothing. */
#ifndef CMWQ_KC_PRINTK_H
#define CMWQ_KC_PRINTK_H
#include <stdio.h>
#define KERN_EMERG ""
#define KERN_ALERT ""
#define KERN_CRIT ""
#define KERN_ERR ""
#define KERN_WARNING ""
#define KERN_NOTICE ""
#define KERN_INFO ""
#define KERN_DEBUG ""
#define KERN_CONT ""
#ifndef pr_fmt
#define pr_fmt(fmt) fmt
#endif
#define printk(fmt, ...) printf(fmt, ##__VA_ARGS__)
#define pr_emerg(fmt, ...) fprintf(stderr, pr_fmt(fmt), ##__VA_ARGS__)
#define pr_alert(fmt, ...) fprintf(stderr, pr_fmt(fmt), ##__VA_ARGS__)
#define pr_crit(fmt, ...) fprintf(stderr, pr_fmt(fmt), ##__VA_ARGS__)
#define pr_err(fmt, ...) fprintf(stderr, pr_fmt(fmt), ##__VA_ARGS__)
#define pr_warn(fmt, ...) fprintf(stderr, pr_fmt(fmt), ##__VA_ARGS__)
#define pr_warning pr_warn
#define pr_notice(fmt, ...) printf(pr_fmt(fmt), ##__VA_ARGS__)
#define pr_info(fmt, ...) printf(pr_fmt(fmt), ##__VA_ARGS__)
#define pr_cont(fmt, ...) printf(fmt, ##__VA_ARGS__)
#define pr_debug(fmt, ...) do { if (0) printf(pr_fmt(fmt), ##__VA_ARGS__); } while (0)
#define pr_err_once pr_err
#define pr_warn_once pr_warn
#define pr_info_once pr_info
#endif
