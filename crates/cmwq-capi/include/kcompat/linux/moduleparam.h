/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * kcompat: module_param(name, type, perm). The value comes from the
 * environment variable of the same name, then from a name=value argument
 * of the program (which wins). Types: int, uint, long, ulong, bool,
 * invbool, charp, short, ushort, byte, llong, ullong, hexint.
 */
#ifndef CMWQ_KC_MODULEPARAM_H
#define CMWQ_KC_MODULEPARAM_H

enum cmwq_kc_param_kind {
	CMWQ_KC_PARAM_int = 0,
	CMWQ_KC_PARAM_uint = 1,
	CMWQ_KC_PARAM_hexint = 1,
	CMWQ_KC_PARAM_long = 2,
	CMWQ_KC_PARAM_ulong = 3,
	CMWQ_KC_PARAM_bool = 4,
	CMWQ_KC_PARAM__Bool = 4,
	CMWQ_KC_PARAM_invbool = 5,
	CMWQ_KC_PARAM_charp = 6,
	CMWQ_KC_PARAM_short = 7,
	CMWQ_KC_PARAM_ushort = 8,
	CMWQ_KC_PARAM_byte = 9,
	CMWQ_KC_PARAM_llong = 10,
	CMWQ_KC_PARAM_ullong = 11,
};

void cmwq_kc_param_register(const char *name, int kind, void *ptr);
int cmwq_kc_params_apply(int argc, const char *const *argv);

#define module_param_named(name, value, type, perm)				\
	__attribute__((constructor)) static void cmwq_kc_param_reg_##name(void)	\
	{									\
		cmwq_kc_param_register(#name, CMWQ_KC_PARAM_##type, (void *)&(value)); \
	}									\
	extern int cmwq_kc_module_dummy
/* Not through module_param_named: `bool` would be expanded (to _Bool) first. */
#define module_param(name, type, perm)						\
	__attribute__((constructor)) static void cmwq_kc_param_reg_##name(void)	\
	{									\
		cmwq_kc_param_register(#name, CMWQ_KC_PARAM_##type, (void *)&(name)); \
	}									\
	extern int cmwq_kc_module_dummy
#define MODULE_PARM_DESC(name, desc) extern int cmwq_kc_module_dummy
#endif
