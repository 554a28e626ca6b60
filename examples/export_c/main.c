/* Go on training the model of train.py with its exported gradient: no Python here. */
#include <stdio.h>
#include "fit.h"

static double w1[16], b1[16], w2[16], x[256], y[256];
static double g1[16], gb[16], g2[16], value;

int main(void) {
    FILE *f = fopen("build/inputs.bin", "rb");
    double *inputs[] = {w1, b1, w2, x, y};
    long sizes[] = {16, 16, 16, 256, 256};
    for (int i = 0; i < 5; i++)
        if (fread(inputs[i], sizeof(double), sizes[i], f) != (size_t)sizes[i]) return 3;
    fclose(f);
    const void *in[] = {w1, b1, w2, x, y};
    void *out[] = {&value, g1, gb, g2};
    for (int step = 0; step <= 2000; step++) {
        int code = fit_grad(in, out);
        if (code) { printf("error %d: %s\n", code, fit_error(code)); return 1; }
        if (step % 500 == 0) printf("C: step %4d  loss %.6f\n", step, value);
        for (int k = 0; k < 16; k++) { w1[k] -= 0.2 * g1[k]; b1[k] -= 0.2 * gb[k]; w2[k] -= 0.2 * g2[k]; }
    }
    return 0;
}
