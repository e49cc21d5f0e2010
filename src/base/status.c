/*
 * status.c: names of kiln_status codes, for messages.
 */
#include "base.h"

static const char *const status_names[KILN_STATUS_COUNT] = {
    [KILN_OK] = "ok",
    [KILN_ERR_INVALID_ARG] = "invalid argument",
    [KILN_ERR_IO] = "i/o error",
    [KILN_ERR_INVALID_MODEL] = "invalid model",
    [KILN_ERR_UNSUPPORTED] = "unsupported",
    [KILN_ERR_SHAPE] = "shape error",
    [KILN_ERR_OOM] = "out of memory",
    [KILN_ERR_DYNAMIC] = "dynamic value",
    [KILN_ERR_NO_DEVICE] = "no device",
    [KILN_ERR_INTERNAL] = "internal error",
};

const char *kiln_status_name(kiln_status s)
{
    return (unsigned)s < KILN_STATUS_COUNT ? status_names[s] : "invalid status";
}
