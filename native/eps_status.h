/* Status codes of the library's checked entry points. */
#ifndef EPS_STATUS_H
#define EPS_STATUS_H
#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    EpsOk = 0,
    EpsErrLength,
    EpsErrValue,
    EpsStatusCount
} EpsStatus;

const char *eps_status_str(EpsStatus status);

#ifdef __cplusplus
}
#endif
#endif
