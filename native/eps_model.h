/* Models on one flat float32 parameter vector: forward, loss, gradient.
 *
 * Layout (shared with numpy and the MicroPython firmware): layers in order,
 * each W (n_in x n_out) row-major then b (n_out). Linear and logistic have
 * one output, softmax n_classes, the MLP one or two hidden layers (ReLU or
 * tanh) and a softmax output. Losses are batch means: squared error, binary
 * cross-entropy, multiclass cross-entropy.
 */
#ifndef EPS_MODEL_H
#define EPS_MODEL_H
#include <stdint.h>

#include "eps_status.h"
#ifdef __cplusplus
extern "C" {
#endif

#ifndef EPS_BATCH_CHUNK
/* rows processed together; bounds the scratch size for any batch */
#define EPS_BATCH_CHUNK 32
#endif
#define EPS_MAX_HIDDEN 2
#define EPS_MAX_DIM (1 << 20)

typedef enum { EpsLinear = 0, EpsLogistic, EpsSoftmax, EpsMlp } EpsKind;
typedef enum { EpsRelu = 0, EpsTanh } EpsActivation;

typedef struct {
    int32_t kind;       /* EpsKind */
    int32_t n_features;
    int32_t n_classes;  /* 1 for linear and logistic */
    int32_t n_hidden;   /* 0, or 1..EPS_MAX_HIDDEN for the MLP */
    int32_t hidden[EPS_MAX_HIDDEN];
    int32_t activation; /* EpsActivation */
} EpsModel;

/* Validates the model and the buffer lengths for a batch of `batch` rows.
 * Labels are checked by the loss itself (it reads them anyway). */
EpsStatus eps_model_check(const EpsModel *model, int32_t params_length,
                          int32_t scratch_length, int32_t batch);
/* number of parameters, or -1 for an invalid model */
int32_t eps_model_n_params(const EpsModel *model);
/* floats of scratch the loss and forward passes need for `batch` rows */
int32_t eps_model_scratch_length(const EpsModel *model, int32_t batch);

/* Mean loss into *loss, gradient into grad (n_params). labels (int32, logistic
 * 0/1 or class ids) or targets (float, linear) holds `batch` values; the other
 * may be NULL. Returns EpsErrValue, before writing anything, on a bad label. */
EpsStatus eps_model_loss_grad(const EpsModel *model, const float *params,
                              const float *x, int32_t batch,
                              const int32_t *labels, const float *targets,
                              float *grad, float *scratch, float *loss);

/* out: values (linear), P(y=1) (logistic), or probabilities (batch x classes) */
void eps_model_forward(const EpsModel *model, const float *params,
                       const float *x, int32_t batch, float *out,
                       float *scratch);

#ifdef __cplusplus
}
#endif
#endif
