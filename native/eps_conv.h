/* Convolutional networks on one flat float32 parameter vector: forward, loss,
 * gradient.
 *
 * An EpsNet is a list of layers over an input of C channels x L samples (1-D)
 * or C x H x W (2-D): convolutions (stride, zero padding, ReLU), max and
 * average pools (no padding), dense layers on the flattened input (ReLU on
 * hidden ones), and a dense output layer over the classes trained with
 * softmax cross-entropy (mean over the batch).
 *
 * Layout (shared with numpy and the MicroPython firmware): layers in order, a
 * convolution's W (N, C, K) or (N, C, K, K) row-major then b (N); a dense
 * layer's W (n_in, n_out) row-major then b (n_out). Inputs and activations
 * are flattened channel first: (C, L) or (C, H, W). A max pool's gradient
 * goes to the first maximum of its window (row-major order of taps).
 */
#ifndef EPS_CONV_H
#define EPS_CONV_H
#include <stdint.h>

#include "eps_status.h"
#ifdef __cplusplus
extern "C" {
#endif

#define EPS_NET_MAX_LAYERS 32

typedef enum { EpsOpConv = 0, EpsOpMaxPool, EpsOpAvgPool, EpsOpDense } EpsOp;

typedef struct {
    int32_t op;     /* EpsOp */
    int32_t n_out;  /* filters (conv) or units (dense); 0 for pools */
    int32_t k;      /* kernel or pool width (K x K in 2-D); 1 for dense */
    int32_t stride; /* 1 for dense */
    int32_t pad;    /* zero padding on each side, below k; 0 for pools, dense */
    int32_t relu;   /* 1 on conv and hidden dense layers, 0 otherwise */
} EpsLayer;

typedef struct {
    int32_t dims;     /* 1 (C x L) or 2 (C x H x W) */
    int32_t in_shape[3]; /* C, L (dims 1) or C, H, W (dims 2) */
    int32_t n_layers; /* 1..EPS_NET_MAX_LAYERS; the last is the dense output */
    EpsLayer layers[EPS_NET_MAX_LAYERS];
} EpsNet;

/* number of parameters, or -1 for an invalid net */
int32_t eps_net_n_params(const EpsNet *net);
/* number of classes (the output layer's width), or -1 for an invalid net */
int32_t eps_net_n_classes(const EpsNet *net);
/* floats of scratch eps_net_loss_grad and eps_net_forward need for `batch`
 * rows, or -1 (invalid net or batch, or too large) */
int32_t eps_net_scratch_length(const EpsNet *net, int32_t batch);
/* Validates the net and the buffer lengths for a batch of `batch` rows:
 * EpsErrValue for an invalid net or batch, EpsErrLength for a buffer that
 * does not fit. Labels are checked by the loss itself. */
EpsStatus eps_net_check(const EpsNet *net, int32_t params_length,
                        int32_t scratch_length, int32_t batch);

/* Mean cross-entropy into *loss and its gradient into grad (n_params), for
 * `batch` rows of x (each prod(in_shape) floats) and their class labels.
 * Returns EpsErrValue, before writing anything, on a bad label. */
EpsStatus eps_net_loss_grad(const EpsNet *net, const float *params, const float *x,
                            int32_t batch, const int32_t *labels, float *grad,
                            float *scratch, float *loss);

/* class probabilities (batch x classes) into out */
void eps_net_forward(const EpsNet *net, const float *params, const float *x,
                     int32_t batch, float *out, float *scratch);

/* One layer alone, for per-layer tests and benchmarks (the calls above are
 * the training path). layer is in [0, n_layers) of a checked net, and the
 * scratch is sized for `batch`. Forward: in (batch x n_in) -> out (batch x
 * n_out), ReLU included. Backward: given the layer's input, its forward
 * output and dy (batch x n_out; the ReLU mask is applied to it in place),
 * writes this layer's slices of grad (W and b; nothing for pools) and, if
 * dx is not NULL, the input gradient dx (batch x n_in). */
void eps_net_layer_forward(const EpsNet *net, int32_t layer, const float *params,
                           const float *in, int32_t batch, float *out, float *scratch);
void eps_net_layer_backward(const EpsNet *net, int32_t layer, const float *params,
                            const float *in, const float *out, float *dy,
                            int32_t batch, float *grad, float *dx, float *scratch);

#ifdef __cplusplus
}
#endif
#endif
