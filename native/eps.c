#include "eps.h"

static const char *const eps_status_strings[EpsStatusCount] = {
    [EpsOk] = "ok",
    [EpsErrLength] = "buffer length mismatch",
    [EpsErrValue] = "invalid value",
};

const char *eps_status_str(EpsStatus status) {
    if ((int)status < 0 || status >= EpsStatusCount) return "unknown status";
    return eps_status_strings[status];
}
