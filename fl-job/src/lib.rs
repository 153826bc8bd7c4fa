//! Federated-learning jobs: Burn models (ResNet-18, MobileNet-V2), local training,
//! FedAvg, the round loop, and the trait a user implements to plug in a custom job.
//!
//! Not built yet.
