package hiprtc

import (
	"bytes"
	"debug/elf"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// KernelSymbols lists the kernels in a code object: an AMDGPU code object
// (each kernel has a "<name>.kd" descriptor), a CUBIN (global functions) or
// PTX text (.entry directives). Names are symbol names, sorted.
func KernelSymbols(image []byte) ([]string, error) {
	if bytes.HasPrefix(image, []byte(elf.ELFMAG)) {
		return elfKernels(image)
	}
	if bytes.Contains(image, []byte(".version")) && bytes.Contains(image, []byte(".target")) {
		return ptxKernels(image), nil
	}
	return nil, fmt.Errorf("hiprtc: KernelSymbols: %d bytes are neither an ELF code object nor PTX", len(image))
}

func elfKernels(image []byte) ([]string, error) {
	f, err := elf.NewFile(bytes.NewReader(image))
	if err != nil {
		return nil, fmt.Errorf("hiprtc: KernelSymbols: %w", err)
	}
	if f.Machine != elf.EM_AMDGPU && f.Machine != elf.EM_CUDA {
		return nil, fmt.Errorf("hiprtc: KernelSymbols: an ELF for %s, not a GPU", f.Machine)
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("hiprtc: KernelSymbols: %w", err)
	}
	var out []string
	switch f.Machine {
	case elf.EM_AMDGPU:
		for _, s := range syms {
			if name, ok := strings.CutSuffix(s.Name, ".kd"); ok && elf.ST_TYPE(s.Info) == elf.STT_OBJECT {
				out = append(out, name)
			}
		}
	case elf.EM_CUDA:
		for _, s := range syms {
			if elf.ST_TYPE(s.Info) == elf.STT_FUNC && elf.ST_BIND(s.Info) == elf.STB_GLOBAL && s.Section != elf.SHN_UNDEF {
				out = append(out, s.Name)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

var ptxEntry = regexp.MustCompile(`\.entry\s+([A-Za-z_$][A-Za-z0-9_$]*)`)

func ptxKernels(ptx []byte) []string {
	var out []string
	for _, m := range ptxEntry.FindAllSubmatch(ptx, -1) {
		out = append(out, string(m[1]))
	}
	sort.Strings(out)
	return out
}
