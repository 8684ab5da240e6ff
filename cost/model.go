package cost

import (
	"fmt"
	"sort"

	"hap/cluster"
)

// Options configure a Model. The zero value means FP32, the default efficiencies and the cluster's own
// profile file (if it names one).
type Options struct {
	// Precision selects the peak: FP32 (the default, "" too), TF32, or FP16/BF16 mixed precision.
	Precision Precision
	// Profile, when non-nil, is used instead of the profile file the cluster names.
	Profile *Profile
	// NoProfile ignores the profile file the cluster names (Profile, if set, still applies).
	NoProfile bool
	// Efficiency overrides the default efficiency of op classes for every device (a profile's
	// per-device entries still take precedence).
	Efficiency map[string]float64
}

// Model is the cost model of one cluster. It is immutable after New.
type Model struct {
	cl        *cluster.Cluster
	precision Precision
	devs      []device
	intra     []link // per node
	inter     link   // per NIC
	nics      int
}

// device is one device's precomputed compute parameters.
type device struct {
	node       int
	spec       cluster.DeviceSpec
	fp32, fp16 float64            // peak FLOP/s (after overrides)
	precision  Precision          // the model's precision
	sustained  float64            // sustained-clock factor (1 when the peak is a measured override)
	memBW      float64            // achieved memory bandwidth, bytes/s
	eff        map[string]float64 // efficiency overrides by class
	measured   map[string]float64 // measured FLOP/s by class
	memory     int64              // capacity, bytes
}

// link is one link's alpha-beta parameters.
type link struct{ bw, lat float64 }

// New builds the cost model of c. It validates c, loads the profile file c names (unless opt says
// otherwise) and checks the precision against every device.
func New(c *cluster.Cluster, opt Options) (*Model, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("cost model: %w", err)
	}
	prec := opt.Precision
	if prec == "" {
		prec = FP32
	}
	prof := opt.Profile
	if prof == nil && !opt.NoProfile && c.ProfilePath() != "" {
		p, err := LoadProfile(c.ProfilePath())
		if err != nil {
			return nil, fmt.Errorf("cost model for cluster %q: %w", c.Name, err)
		}
		prof = p
	}
	classes := make([]string, 0, len(opt.Efficiency))
	for class := range opt.Efficiency {
		classes = append(classes, class)
	}
	sort.Strings(classes) // report the first bad one deterministically
	for _, class := range classes {
		if e := opt.Efficiency[class]; !(e > 0 && e <= 1) {
			return nil, fmt.Errorf("cost model: efficiency of class %q must be in (0, 1], got %g", class, e)
		}
	}
	m := &Model{cl: c, precision: prec, nics: c.Inter.NICsPerNode,
		inter: link{c.Inter.Bandwidth * linkEfficiency(c.Inter.Class), c.Inter.Latency}}
	if lp, ok := prof.link(c.Inter.Class); ok && len(c.Nodes) > 1 {
		m.inter = lp.apply(m.inter)
	}
	for ni, nd := range c.Nodes {
		l := link{nd.Intra.Bandwidth, nd.Intra.Latency}
		if lp, ok := prof.link(nd.Intra.Class); ok && nd.Count > 1 {
			l = lp.apply(l)
		}
		m.intra = append(m.intra, l)
		spec := nd.Spec()
		if err := checkPrecision(prec, spec.Name, spec.Arch); err != nil {
			return nil, fmt.Errorf("cost model for cluster %q: %w", c.Name, err)
		}
		d := device{node: ni, spec: spec, fp32: spec.FP32, fp16: spec.FP16, precision: prec,
			sustained: sustainedClock(spec.Name), memBW: spec.MemBandwidth * MemoryBandwidthEfficiency,
			eff: map[string]float64{}, measured: map[string]float64{}, memory: spec.Memory}
		if nd.Overrides.FP32 > 0 || nd.Overrides.FP16 > 0 {
			d.sustained = 1
		}
		for class, e := range opt.Efficiency {
			d.eff[class] = e
		}
		if dp, ok := prof.device(spec.Name); ok {
			if err := plausible(dp, spec.Name, max(spec.FP32, spec.FP16), spec.MemBandwidth); err != nil {
				return nil, fmt.Errorf("cost model for cluster %q: profile %s: %w", c.Name, prof.Source, err)
			}
			if dp.MemBandwidth > 0 {
				d.memBW = dp.MemBandwidth
			}
			for class, cp := range dp.Classes {
				if cp.FLOPS > 0 {
					d.measured[class] = cp.FLOPS
				} else if cp.Efficiency > 0 {
					d.eff[class] = cp.Efficiency
				}
			}
		}
		for l := 0; l < nd.Count; l++ {
			m.devs = append(m.devs, d)
		}
	}
	return m, nil
}

// Cluster is the cluster the model describes.
func (m *Model) Cluster() *cluster.Cluster { return m.cl }

// Precision is the model's arithmetic precision.
func (m *Model) Precision() Precision { return m.precision }

// NumDevices is the number of devices.
func (m *Model) NumDevices() int { return len(m.devs) }

// Node is the node index of device dev.
func (m *Model) Node(dev int) int { return m.devs[dev].node }

// Spec is the effective spec (catalog plus overrides) of device dev.
func (m *Model) Spec(dev int) cluster.DeviceSpec { return m.devs[dev].spec }

// Capacity is the memory capacity of device dev in bytes.
func (m *Model) Capacity(dev int) int64 { return m.devs[dev].memory }

// measuredOverPeak is how far above a device's datasheet peak a measured
// rate may be before it is refused: clocks boost past the datasheet's
// figure by a few percent, never by a quarter; a rate beyond that is a
// unit slip (TB/s for GB/s) or the profile of another device.
const measuredOverPeak = 1.25

// plausible checks one device type's measurements against its datasheet
// (after the cluster file's overrides): achieved FLOP/s against the
// larger of its FP32 and FP16 peaks, achieved memory bandwidth against
// its own.
func plausible(dp DeviceProfile, device string, peakFLOPS, peakBW float64) error {
	classes := make([]string, 0, len(dp.Classes))
	for class := range dp.Classes {
		classes = append(classes, class)
	}
	sort.Strings(classes) // report the first bad one deterministically
	for _, class := range classes {
		if f := dp.Classes[class].FLOPS; peakFLOPS > 0 && f > measuredOverPeak*peakFLOPS {
			return fmt.Errorf("devices.%s.classes.%s: %.4g TFLOPS measured, above the device's peak of %.4g TFLOPS (a unit slip, or another device's profile?)", device, class, f/1e12, peakFLOPS/1e12)
		}
	}
	if bw := dp.MemBandwidth; peakBW > 0 && bw > measuredOverPeak*peakBW {
		return fmt.Errorf("devices.%s.mem_bandwidth: %.4g GB/s measured, above the device's %.4g GB/s (a unit slip, or another device's profile?)", device, bw/1e9, peakBW/1e9)
	}
	return nil
}
