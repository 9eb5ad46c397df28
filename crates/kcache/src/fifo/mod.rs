//! Queues between the reflector and the informer: `RealFifo` and `DeltaFifo`.
