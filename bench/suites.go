package bench

import (
	"fmt"

	"hap/cluster"
)

// Suite names.
const (
	SuitePaper   = "paper"
	SuiteModern  = "modern"
	SuiteScaling = "scaling"
	SuiteDevices = "devices"
)

// SuiteNames lists the suites.
func SuiteNames() []string { return []string{SuitePaper, SuiteModern, SuiteScaling, SuiteDevices} }

var (
	paperModels   = []string{"vgg19", "vit", "bert-base", "bert-moe"}
	paperClusters = []string{"paper-8", "paper-16", "paper-32", "paper-64", "paper-29"}
	modernModels  = []string{"gpt2", "bert-base"}
	// modernClusters are the newer-GPU clusters.
	modernClusters = []string{"modern-24", "v100-8", "a100-8"}
	// scalingLayers are the ViT depths of the synthesis-time sweep.
	scalingLayers  = []int{4, 8, 12, 24, 48}
	scalingModel   = "vit"
	scalingCluster = "paper-16"
	// scalingDevices sweeps bert-base over the paper clusters.
	scalingDevicesModel = "bert-base"
	scalingDevices      = []string{"paper-8", "paper-16", "paper-32", "paper-64"}
	// devicesModels and devicesClusters are the device search's suite, at
	// the zoo's batch (devicesBatch), where leaving devices idle pays.
	devicesModels   = []string{"vgg19", "vit", "bert-base", "gpt2"}
	devicesClusters = []string{"paper-8", "paper-16", "modern-24"}
	// devicesPaperClusters: the device search at the paper suite's
	// batches too, on its clusters of one layout per size (paper-29, of
	// six kinds of machine, takes minutes).
	devicesPaperClusters = []string{"paper-8", "paper-16", "paper-32", "paper-64"}
	// devicesModernCluster: the device search at the modern suite's
	// batches on its cluster of three GPU types.
	devicesModernCluster = "modern-24"
)

// ModernBatch is the modern suite's global batch for model on n GPUs:
// 32 × GPUs, except gpt2's 1 × GPUs (its sequence is 1024; 32 × GPUs does
// not fit the paper's 16 GB GPUs, nor the T4s).
func ModernBatch(model string, n int) int {
	if model == "gpt2" {
		return n
	}
	return PaperBatchPerGPU * n
}

// devicesBatch is the devices suite's global batch: the zoo's.
const devicesBatch = 32

// Suite returns a suite's cases.
//
//   - paper: the paper's four models on its five cluster layouts, global
//     batch 32 × GPUs.
//   - modern: gpt2 and bert-base on newer GPUs. gpt2's sequence is 1024,
//     so its batch is 1 × GPUs (32 × GPUs would not fit); bert-base keeps
//     32 × GPUs.
//   - scaling: synthesis time of ViT with 4–48 layers on paper-16, and of
//     bert-base on 8–64 GPUs; dp-ev, hap-paper and hap.
//   - devices: the device search (hap plan's default, hap-devices) at the
//     zoo's batch of 32 on paper-8, paper-16 and modern-24, and at the
//     paper suite's batches (32 × GPUs) for its models on paper-8 to
//     paper-64, and the modern suite's on modern-24, beside dp-ev, dp-cp
//     and hap on every device.
func Suite(name string) ([]Case, error) {
	var cases []Case
	switch name {
	case SuitePaper:
		for _, m := range paperModels {
			for _, c := range paperClusters {
				n, err := devices(c)
				if err != nil {
					return nil, err
				}
				cases = append(cases, Case{Model: m, Cluster: c, Batch: PaperBatchPerGPU * n})
			}
		}
	case SuiteModern:
		for _, m := range modernModels {
			for _, c := range modernClusters {
				n, err := devices(c)
				if err != nil {
					return nil, err
				}
				cases = append(cases, Case{Model: m, Cluster: c, Batch: ModernBatch(m, n)})
			}
		}
	case SuiteScaling:
		sys := []string{SystemDPEV, SystemPaper, SystemHAP}
		n, err := devices(scalingCluster)
		if err != nil {
			return nil, err
		}
		for _, l := range scalingLayers {
			cases = append(cases, Case{Model: scalingModel, Cluster: scalingCluster, Batch: PaperBatchPerGPU * n, Layers: l, Systems: sys})
		}
		for _, c := range scalingDevices {
			n, err := devices(c)
			if err != nil {
				return nil, err
			}
			cases = append(cases, Case{Model: scalingDevicesModel, Cluster: c, Batch: PaperBatchPerGPU * n, Systems: sys})
		}
	case SuiteDevices:
		// hap plans on every device, as the HAP paper does: the search's
		// plan and its planning time beside it.
		devicesSystems := []string{SystemDPEV, SystemDPCP, SystemHAP, SystemHAPDevices}
		for _, m := range devicesModels {
			for _, c := range devicesClusters {
				cases = append(cases, Case{Model: m, Cluster: c, Batch: devicesBatch, Systems: devicesSystems})
			}
		}
		for _, m := range paperModels {
			for _, c := range devicesPaperClusters {
				n, err := devices(c)
				if err != nil {
					return nil, err
				}
				cases = append(cases, Case{Model: m, Cluster: c, Batch: PaperBatchPerGPU * n, Systems: devicesSystems})
			}
		}
		// And modern-24 at the modern suite's batches.
		n, err := devices(devicesModernCluster)
		if err != nil {
			return nil, err
		}
		for _, m := range modernModels {
			cases = append(cases, Case{Model: m, Cluster: devicesModernCluster, Batch: ModernBatch(m, n), Systems: devicesSystems})
		}
	default:
		return nil, fmt.Errorf("%w %q (want one of %v)", ErrUnknownSuite, name, SuiteNames())
	}
	return cases, nil
}

func devices(spec string) (int, error) {
	c, err := cluster.Load(spec)
	if err != nil {
		return 0, fmt.Errorf("suite cluster %s: %w", spec, err)
	}
	return c.NumDevices(), nil
}
