#ifndef EPS_H
#define EPS_H
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
