# source: https://github.com/HIPS/autograd/blob/master/examples/gplvm.py
# licence: MIT, (c) the President and Fellows of Harvard University (HIPS autograd)
# edits: plotting cut (the callback's computations kept); minimize's iterations capped at 10 (options maxiter) and its result kept as `result`
# compare: result.x rtol=1e-9 atol=1e-11
# steps: 20
# ruff: noqa (the program as its authors wrote it, with the edits above)

# Implements a Gaussian process latent-variable model.
# The (high-dimensional) data, Y is explained by some low-dimensional latent
# data X, warped by a function drawn from a GP prior (f).  So Y = f(X), but
# we don't know X or f.
#
# In this example, we optimize X and the hyperparameters of the GP, but
# we integrate over all possible functions f.
#
# Normally the observed data would be high-dimensional.
#
# David Duvenaud (duvenaud@gmail.com)


from data import make_pinwheel
from gaussian_process import make_gp_funs, rbf_covariance
from scipy.optimize import minimize

import jitad.numpy as np
import jitad.numpy.random as npr
from jitad import value_and_grad
from jitad.scipy.stats import norm

if __name__ == "__main__":
    data_dimension = 2  # Normally the data dimension would be much higher.
    latent_dimension = 2

    # Build model and objective function.
    params_per_gp, predict, log_marginal_likelihood = make_gp_funs(
        rbf_covariance, num_cov_params=latent_dimension + 1
    )
    total_gp_params = data_dimension * params_per_gp

    data = make_pinwheel(radial_std=0.3, tangential_std=0.05, num_classes=3, num_per_class=30, rate=0.4)
    datalen = data.shape[0]

    num_latent_params = datalen * latent_dimension

    def unpack_params(params):
        gp_params = np.reshape(params[:total_gp_params], (data_dimension, params_per_gp))
        latents = np.reshape(params[total_gp_params:], (datalen, latent_dimension))
        return gp_params, latents

    def objective(params):
        gp_params, latents = unpack_params(params)
        gp_likelihood = sum(
            [log_marginal_likelihood(gp_params[i], latents, data[:, i]) for i in range(data_dimension)]
        )
        latent_prior_likelihood = np.sum(norm.logpdf(latents))
        return -gp_likelihood - latent_prior_likelihood

    # Set up figure.

    def callback(params):
        print(f"Log likelihood {-objective(params)}")
        _gp_params, latents = unpack_params(params)




    # Initialize covariance parameters
    rs = npr.RandomState(1)
    init_params = rs.randn(total_gp_params + num_latent_params) * 0.1

    print("Optimizing covariance parameters and latent variable locations...")
    result = minimize(value_and_grad(objective), init_params, jac=True, method="CG", callback=callback, options={"maxiter": 10})
