package gpu

import "github.com/agentrl/agentrl/policy/backend"

// AdamWStep is one step of torch.optim.AdamW (amsgrad off): the
// hyperparameters, the learning rate of this step and the 1-based step
// count. It is backend.AdamWStep, so that Backend implements
// backend.Optimizer and a model's training state can stay on the device
// (policy's device optimizer); the kernel uses the float32 constants of
// its Scalars, operation for operation as backend.AdamWUpdate.
type AdamWStep = backend.AdamWStep
