# cublas_path.sh, sourced by the GPU scripts: when the loader's cache has
# no libcublas.so.11/.12/.13, it looks for one in a CUDA toolkit
# (/usr/local/cuda/lib64, /usr/local/cuda-*/targets/x86_64-linux/lib),
# then where the Python packages put it, and prepends that folder to
# LD_LIBRARY_PATH — the CUDA 13
# wheels' nvidia/cu13/lib, the CUDA 12 nvidia-cublas wheel's
# nvidia/cublas/lib, torch's own lib — in every site-packages folder
# python3 knows. It says on stderr which folder it took, or that it
# found none (the backend then refuses the device; see ErrNoCuBLAS).
cublas_path() {
	if ldconfig -p 2>/dev/null | grep -qE 'libcublas\.so\.1[123]'; then
		return 0
	fi
	local dir d
	# A CUDA toolkit's own folders first.
	for d in /usr/local/cuda/lib64 /usr/local/cuda-*/targets/x86_64-linux/lib; do
		if compgen -G "$d/libcublas.so.1[123]*" >/dev/null; then
			echo "cuBLAS: $d" >&2
			export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
			return 0
		fi
	done
	dir=$(python3 - <<-'EOF' 2>/dev/null
		import glob, os, site, sys
		roots = list(dict.fromkeys(site.getsitepackages() + [site.getusersitepackages()] + [p for p in sys.path if p]))
		cands = []
		for r in roots:
		    cands += [os.path.join(r, "nvidia", "cu13", "lib"), os.path.join(r, "nvidia", "cublas", "lib")]
		try:
		    import torch
		    cands.append(os.path.join(os.path.dirname(torch.__file__), "lib"))
		except Exception:
		    pass
		for c in cands:
		    if glob.glob(os.path.join(c, "libcublas.so.1[123]*")):
		        print(c)
		        break
	EOF
	)
	if [ -n "$dir" ]; then
		echo "cuBLAS: $dir" >&2
		export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	else
		echo "cuBLAS: no libcublas.so.11/12/13 in the loader's cache, a CUDA toolkit or the Python packages (nvidia/cu13/lib, nvidia/cublas/lib, torch/lib)" >&2
	fi
}
cublas_path
